-- fair release: compare-and-delete of the lock by its owner, the owner out of the line, then
-- the lock handed to the waiter now at the head of the line: taken for it here (a token
-- issued, the lock set to "<head>:<token>" until its beat runs out, the head out of the
-- line) and the token sent on its own channel, so the hand-off costs the head no round trip.
-- Also what a waiter that gives up, and an abandoned attempt, send for their owner.
--
-- KEYS[1]  lock     <ns>:{l:<key>}:lock   string "<owner>:<token>"
-- KEYS[2]  queue    <ns>:{l:<key>}:q      zset, see queue.lua
-- KEYS[3]  beats    <ns>:{l:<key>}:b      zset
-- KEYS[4]  wake     <ns>:{l:<key>}:w:     prefix of each waiter's channel
-- KEYS[5]  channel  <ns>:{l:<key>}:ch     the unfair waiters' channel (a key mixing both modes)
-- KEYS[6]  counter  <ns>:{l:<key>}        string: the last token issued
-- ARGV[1]  owner    "<owner>:" (the prefix of the value we set)
-- ARGV[2]  publish  'PUBLISH' or 'SPUBLISH'
-- ARGV[3]  keep     ms to keep the counter after a hand-off (at least the granted lease)
--
-- The head's lease is what is left of its beat: its last attempt (sent no earlier than
-- its local clock says) renewed the beat for one lease, so its watchdog, counting from
-- that attempt, never outlives the lock. The message is "g:<token>"; a head whose
-- subscription lost it finds the lock its own at its next attempt (acquire.lua).
--
-- Returns 1 when the lock was ours and was deleted, else 0.

--# include ../../../redis/scripts/fields.lua
--# include ../scripts/token.lua
--# include ../../semaphore/redis/queue.lua

local lock, queue, beats, prefix, channel, counter = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local ownerPrefix, publish, keep = ARGV[1], ARGV[2], tonumber(ARGV[3])
if #ownerPrefix < 2 or string.sub(ownerPrefix, -1) ~= ':' then
  return redis.error_reply('ERR stampede-guard fair release: owner must be "<owner>:"')
end
if not keep or keep < 1 or keep % 1 ~= 0 then
  return redis.error_reply('ERR stampede-guard fair release: keep must be a positive integer (ms)')
end

local nowMs, nowUs = serverClock()
zsetOnly(queue)
zsetOnly(beats)
local released = 0
local value = stringAt(lock)
if value and string.sub(value, 1, #ownerPrefix) == ownerPrefix then
  redis.call('DEL', lock)
  released = 1
end
leave(queue, beats, string.sub(ownerPrefix, 1, -2))
pruneWaiters(queue, beats, nowMs)
if redis.call('EXISTS', lock) == 0 then
  local head = headOf(queue)
  local command = publish == 'SPUBLISH' and 'SPUBLISH' or 'PUBLISH'
  if head then
    local lease = math.floor(tonumber(redis.call('ZSCORE', beats, head)) - nowMs)
    if lease >= 1 then
      local text = integer(issueTokens(counter, nowUs, 1, math.max(keep, lease)))
      redis.call('SET', lock, head .. ':' .. text, 'PX', lease)
      leave(queue, beats, head)
      redis.call(command, prefix .. head, 'g:' .. text)
    else
      wake(prefix, head, publish)
    end
  elseif released == 1 then
    redis.call(command, channel, 'r')
  end
end
return released
