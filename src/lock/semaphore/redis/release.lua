-- semaphore release: gives back an owner's permits and takes it out of the line, then wakes
-- the waiter now at the head if any permit is free. Also what a waiter that gives up, and an
-- abandoned attempt (no reply: it may still run), send for their owner.
--
-- KEYS[1]  holders  <ns>:{s:<name>}:h   zset, see acquire.lua
-- KEYS[2]  queue    <ns>:{s:<name>}:q
-- KEYS[3]  beats    <ns>:{s:<name>}:b
-- KEYS[4]  wake     <ns>:{s:<name>}:w:  prefix of each waiter's channel
-- KEYS[5]  tokens   <ns>:{s:<name>}:t   hash, see permits.lua
-- ARGV[1]  owner
-- ARGV[2]  count    permits the owner holds (or would have held), integer in 1..10000
-- ARGV[3]  permits  the semaphore's size
-- ARGV[4]  publish  'PUBLISH' or 'SPUBLISH'
--
-- Returns how many of the owner's permits were still live and are now given back: less
-- than `count` means some had expired (and may have been taken by others): lost, not released.

--# include ../../../redis/scripts/fields.lua
--# include queue.lua
--# include chunks.lua
--# include permits.lua

local holders, queue, beats, prefix, tokens = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local owner, publish = ARGV[1], ARGV[4]
local count, permits = tonumber(ARGV[2]), tonumber(ARGV[3])
if not count or count < 1 or count > 10000 or count % 1 ~= 0 or not permits or permits < 1 then
  return redis.error_reply('ERR stampede-guard semaphore release: count and permits must be positive integers')
end

local nowMs = serverClock()
zsetOnly(holders)
zsetOnly(queue)
zsetOnly(beats)
-- An expired permit is not ours to give back, even if nobody has pruned it yet.
if redis.call('TYPE', tokens)['ok'] ~= 'hash' then redis.call('DEL', tokens) end
prunePermits(holders, tokens, nowMs)
local members = {}
for i = 0, count - 1 do members[#members + 1] = owner .. ':' .. i end
local released = inChunks('ZREM', holders, nil, members, 1000)
redis.call('HDEL', tokens, owner)
leave(queue, beats, owner)
pruneWaiters(queue, beats, nowMs)
local head = headOf(queue)
if head and permits - redis.call('ZCARD', holders) > 0 then wake(prefix, head, publish) end
return released
