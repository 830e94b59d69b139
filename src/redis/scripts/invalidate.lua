-- invalidate: delete the value and raise the fence above every token handed out so
-- far, so a load that started before this call cannot store its (possibly old)
-- result afterwards: stale-set protection, as memcache leases give. A lock in
-- flight is left alone; its commit is refused and its waiters re-check.
--
-- KEYS[1]  entry hash  <ns>:{tag}
-- KEYS[2]  fresh copy  <ns>:{tag}:v
-- ARGV[1]  retention   ms to keep the fence (longest time a leader may hold its lock)
-- ARGV[2]  broadcast   the invalidation channel (with the client's key prefix), '' for none
-- ARGV[3]  message     '<cache id>|<key>': every other process drops its L1 copy. Published
--                      here, with the write, so a delete never succeeds untold.
--
-- Returns 1.

local entry = KEYS[1]
local time = redis.call('TIME')
local nowMicros = tonumber(time[1]) * 1000000 + tonumber(time[2])

local counter = 0
if redis.call('TYPE', entry)['ok'] == 'hash' then
  counter = tonumber(redis.call('HGET', entry, 'c') or '0')
end
local highWater = string.format('%.0f', math.max(counter, nowMicros))
redis.call('DEL', entry, KEYS[2])
redis.call('HSET', entry, 'c', highWater, 'f', highWater)
redis.call('PEXPIRE', entry, ARGV[1])
if ARGV[2] ~= '' then redis.call('PUBLISH', ARGV[2], ARGV[3]) end
return 1
