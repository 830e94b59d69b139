-- semaphore acquire: take `count` permits of `permits` if they are free and no waiter is
-- ahead in line (FIFO: a large request at the head is never starved by a stream of small
-- ones), with one fencing token per permit; else join the line (or keep its place) and beat.
--
-- KEYS[1]  holders  <ns>:{s:<name>}:h   zset  member "<owner>:<i>" (i = 0..count-1), score =
--                                            server ms at which that permit expires
-- KEYS[2]  counter  <ns>:{s:<name>}     string: the last token issued
-- KEYS[3]  queue    <ns>:{s:<name>}:q   zset, see queue.lua
-- KEYS[4]  beats    <ns>:{s:<name>}:b   zset, see queue.lua
-- KEYS[5]  wake     <ns>:{s:<name>}:w:  prefix of each waiter's channel (same slot)
-- KEYS[6]  tokens   <ns>:{s:<name>}:t   hash owner -> first token, see permits.lua
-- ARGV[1]  owner    128 random bits (hex), new for each acquisition
-- ARGV[2]  count    permits wanted, integer in 1..permits
-- ARGV[3]  permits  the semaphore's size, integer in 1..10000
-- ARGV[4]  lease    ms, integer in 1..2^31-1
-- ARGV[5]  beat     ms a waiter stays in line without another attempt; 0 = do not join (tryAcquire)
-- ARGV[6]  keep     ms to keep the counter after this acquisition (>= lease)
-- ARGV[7]  publish  'PUBLISH' or 'SPUBLISH'
--
-- Returns {1, first token} when taken (tokens first .. first+count-1, decimal string), or
-- {0, ms until the earliest permit expires (-1 when none is held)}.
--
-- The same attempt run twice (ioredis resends a command whose reply a connection reset
-- lost) answers the same: the owner's permits and first token, not "busy" with an orphan.
--
-- Every time is the server's (TIME): a client's clock never enters a score. Tokens follow
-- the lock's rule: max(last + 1, server µs), so they never repeat across an expired counter
-- or a restart (fields.lua).

--# include ../../../redis/scripts/fields.lua
--# include ../../redis/scripts/token.lua
--# include queue.lua
--# include chunks.lua
--# include permits.lua

local holders, counter, queue, beats, prefix, tokens = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local owner, publish = ARGV[1], ARGV[7]
local count, permits, lease, beat, keep =
  tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
if not permits or permits < 1 or permits > 10000 or permits % 1 ~= 0 then
  return redis.error_reply('ERR stampede-guard semaphore: permits must be an integer in 1..10000')
end
if not count or count < 1 or count > permits or count % 1 ~= 0 then
  return redis.error_reply('ERR stampede-guard semaphore: count must be an integer in 1..permits')
end
if not lease or lease < 1 or lease > 2147483647 or lease % 1 ~= 0 then
  return redis.error_reply('ERR stampede-guard semaphore: lease must be an integer in 1..2^31-1 ms')
end
if not beat or beat < 0 or beat > 2147483647 or beat % 1 ~= 0 or not keep or keep < lease then
  return redis.error_reply('ERR stampede-guard semaphore: beat must be an integer >= 0 and keep >= lease')
end

local nowMs, nowUs = serverClock()
zsetOnly(holders)
zsetOnly(queue)
zsetOnly(beats)
if redis.call('TYPE', tokens)['ok'] ~= 'hash' then redis.call('DEL', tokens) end
prunePermits(holders, tokens, nowMs) -- expired permits are free again
if redis.call('ZSCORE', holders, owner .. ':0') then
  local first = redis.call('HGET', tokens, owner)
  if first then return {1, first} end
end
local headBefore = headOf(queue)
pruneWaiters(queue, beats, nowMs)
local head = headOf(queue)
local free = permits - redis.call('ZCARD', holders)

if (head == nil or head == owner) and count <= free then
  local first = issueTokens(counter, nowUs, count, keep)
  local args = {}
  for i = 0, count - 1 do
    args[#args + 1] = nowMs + lease
    args[#args + 1] = owner .. ':' .. i
  end
  inChunks('ZADD', holders, nil, args, 1000) -- score, member pairs: an even step
  redis.call('HSET', tokens, owner, integer(first))
  for _, key in ipairs({holders, tokens}) do
    if redis.call('PTTL', key) < lease then redis.call('PEXPIRE', key, lease) end
  end
  leave(queue, beats, owner)
  -- Permits left over go to the next in line: wake it (it may want more than are free:
  -- then it waits on, having cost one attempt).
  local next = headOf(queue)
  if next and free - count > 0 then wake(prefix, next, publish) end
  return {1, integer(first)}
end

if beat > 0 then enqueue(queue, beats, owner, nowUs, nowMs, beat) end
-- Dead waiters ahead were dropped: the new head may have permits waiting for it.
local newHead = headOf(queue)
if newHead and newHead ~= headBefore and newHead ~= owner and free > 0 then wake(prefix, newHead, publish) end
local earliest = redis.call('ZRANGE', holders, 0, 0, 'WITHSCORES')[2]
return {0, earliest and (tonumber(earliest) - nowMs) or -1}
