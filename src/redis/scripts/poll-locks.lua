-- poll-locks: the safety-net poll of many waiters in one call (pub/sub wakes them first):
-- how long each lock they wait on is still held. A waiter whose lock is gone re-checks
-- with its own lookup; the others sleep on, at most until their lock's lease ends.
--
-- KEYS[i]  lock  <ns>:{tag}:lock a waiter waits on (any number, all in one slot on a Cluster)
--
-- Returns one entry per lock: its PTTL in ms, -2 when it is gone, -1 when it has no expiry (a
-- planted key, of any type: the waiter's own lookup then repairs or replaces it).

local ttls = {}
for i, lock in ipairs(KEYS) do
  ttls[i] = redis.call('PTTL', lock)
end
return ttls
