-- fair release: compare-and-delete of the lock by its owner, the owner out of the line,
-- then the waiter now at the head of the line woken alone, on its own channel. Also what a
-- waiter that gives up, and an abandoned attempt, send for their owner.
--
-- KEYS[1]  lock     <ns>:{l:<key>}:lock   string "<owner>:<token>"
-- KEYS[2]  queue    <ns>:{l:<key>}:q      zset, see queue.lua
-- KEYS[3]  beats    <ns>:{l:<key>}:b      zset
-- KEYS[4]  wake     <ns>:{l:<key>}:w:     prefix of each waiter's channel
-- KEYS[5]  channel  <ns>:{l:<key>}:ch     the unfair waiters' channel (a key mixing both modes)
-- ARGV[1]  owner    "<owner>:" (the prefix of the value we set)
-- ARGV[2]  publish  'PUBLISH' or 'SPUBLISH'
--
-- Returns 1 when the lock was ours and was deleted, else 0.

--# include ../../../redis/scripts/fields.lua
--# include ../../semaphore/redis/queue.lua

local lock, queue, beats, prefix, channel = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local ownerPrefix, publish = ARGV[1], ARGV[2]
if #ownerPrefix < 2 or string.sub(ownerPrefix, -1) ~= ':' then
  return redis.error_reply('ERR stampede-guard fair release: owner must be "<owner>:"')
end

local nowMs = serverClock()
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
  if head then
    wake(prefix, head, publish)
  elseif released == 1 then
    redis.call(publish == 'SPUBLISH' and 'SPUBLISH' or 'PUBLISH', channel, 'r')
  end
end
return released
