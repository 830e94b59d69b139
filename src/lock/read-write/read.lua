-- read: take a read lock unless a writer holds the lock or waits for it (writers first).
--
-- KEYS[1]  readers  <ns>:{rw:<name>}:readers  zset: reader owner -> its lease's end, server ms
-- KEYS[2]  writer   <ns>:{rw:<name>}:writer   string "<owner>:<token>", PX lease
-- KEYS[3]  wanted   <ns>:{rw:<name>}:wanted   zset: waiting writer owner -> end of its claim, server ms
-- KEYS[4]  counter  <ns>:{rw:<name>}          string: the last token issued
-- ARGV[1]  owner    128 random bits (hex), new for each acquisition
-- ARGV[2]  lease    ms, integer in 1 .. 2^31-1
-- ARGV[3]  keep     ms to keep the counter after this acquisition (>= lease)
--
-- Returns {1, token} when taken, {0, ms} when a writer holds or wants it (ms: how long
-- that can last without news). Each reader has a lease of its own: a reader that died is
-- dropped when its own lease ends, whatever the other readers renew.

--# include ../../redis/scripts/fields.lua
--# include ../redis/scripts/token.lua
--# include rw-common.lua

local readers, writer, wanted, counter = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local owner, lease, keep = ARGV[1], checkedMs(ARGV[2], 'lease'), checkedMs(ARGV[3], 'keep')
local now, nowUs = serverClock()
dropExpired(readers, wanted, now)

local writerTtl = stringTtl(writer)
if writerTtl then return {0, writerTtl} end
local firstWanted = redis.call('ZRANGE', wanted, 0, 0, 'WITHSCORES')
if firstWanted[2] then return {0, math.max(1, tonumber(firstWanted[2]) - now)} end

local token = nextToken(counter, nowUs, keep)
redis.call('ZADD', readers, now + lease, owner)
keepUntilLast(readers, now)
return {1, token}
