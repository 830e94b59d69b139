-- claim: take a run-once claim (ShedLock semantics) unless another live claim exists.
-- Every instant is the server's clock (TIME), never a node's.
--
-- KEYS[1]  claim   <ns>:{o:<name>}   string "<owner>|<claimed at, server ms>"
-- ARGV[1]  owner   unique per claim (no "|")
-- ARGV[2]  atMost  ms: the claim ends by itself after this long (lockAtMostFor), so a
--                  runner that crashed does not block the job for longer
--
-- Returns the claim time in server ms when claimed, or nil when a live claim exists.

--# include ../../../redis/scripts/fields.lua

local claim, owner, atMost = KEYS[1], ARGV[1], tonumber(ARGV[2])
if not atMost or atMost < 1 or string.find(owner, '|', 1, true) then
  return redis.error_reply('ERR stampede-guard claim: owner without "|" and atMost >= 1 ms expected')
end
local now = serverClock()
if redis.call('SET', claim, owner .. '|' .. integer(now), 'NX', 'PX', atMost) then return now end
-- A claim without an expiry (planted, or of any foreign type) would block the job for ever:
-- it ends like any claim, lockAtMostFor from now.
heldFor(claim, atMost)
return nil
