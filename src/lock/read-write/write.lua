-- write: take the write lock when no reader and no other writer holds it; else queue as a
-- waiting writer, which keeps new readers out until it gets in or its claim ends.
--
-- KEYS[1..4] as in read.lua (readers, writer, wanted, counter)
-- ARGV[1]  owner    128 random bits (hex), new for each acquisition
-- ARGV[2]  lease    ms, integer in 1 .. 2^31-1
-- ARGV[3]  keep     ms to keep the counter after this acquisition (>= lease)
-- ARGV[4]  want     ms a waiting writer's claim stands without being renewed by its next attempt
--
-- Returns {1, token} when taken, {0, ms} when busy (ms: when to try again at the latest).

--# include ../../redis/scripts/fields.lua
--# include ../redis/scripts/token.lua
--# include rw-common.lua

local readers, writer, wanted, counter = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local owner, lease = ARGV[1], checkedMs(ARGV[2], 'lease')
local keep, want = checkedMs(ARGV[3], 'keep'), checkedMs(ARGV[4], 'want')
local now, nowUs = serverClock()
dropExpired(readers, wanted, now)

local busyFor = stringTtl(writer)
local lastReader = redis.call('ZRANGE', readers, -1, -1, 'WITHSCORES')
if lastReader[2] then busyFor = math.max(busyFor or 0, tonumber(lastReader[2]) - now) end
if busyFor then
  redis.call('ZADD', wanted, now + want, owner)
  keepUntilLast(wanted, now)
  return {0, math.max(1, math.min(busyFor, want / 2))}
end

redis.call('ZREM', wanted, owner)
local token = nextToken(counter, nowUs, keep)
redis.call('SET', writer, owner .. ':' .. token, 'PX', lease)
return {1, token}
