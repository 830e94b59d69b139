-- semaphore renew: extends an owner's permits to `lease` from now, only if every one of them
-- is still live. An expired permit is never brought back (redis-semaphore #175, #205): a
-- renewal racing a release, or arriving after the expiry, extends nothing.
--
-- KEYS[1]  holders  <ns>:{s:<name>}:h   zset, see acquire.lua
-- ARGV[1]  owner
-- ARGV[2]  count    permits the owner holds, integer in 1..10000
-- ARGV[3]  lease    ms, integer in 1..2^31-1
--
-- Returns 1 when extended, 0 when any of them is gone (the permits are lost).

--# include ../../../redis/scripts/fields.lua
--# include chunks.lua

local holders, owner = KEYS[1], ARGV[1]
local count, lease = tonumber(ARGV[2]), tonumber(ARGV[3])
if not count or count < 1 or count > 10000 or count % 1 ~= 0 then
  return redis.error_reply('ERR stampede-guard semaphore renew: count must be an integer in 1..10000')
end
if not lease or lease < 1 or lease > 2147483647 or lease % 1 ~= 0 then
  return redis.error_reply('ERR stampede-guard semaphore renew: lease must be an integer in 1..2^31-1 ms')
end
if redis.call('TYPE', holders)['ok'] ~= 'zset' then return 0 end

local nowMs = serverClock()
local args = {}
for i = 0, count - 1 do
  local member = owner .. ':' .. i
  local expires = tonumber(redis.call('ZSCORE', holders, member))
  if not expires or expires <= nowMs then return 0 end
  args[#args + 1] = nowMs + lease
  args[#args + 1] = member
end
inChunks('ZADD', holders, 'XX', args, 1000)
if redis.call('PTTL', holders) < lease then redis.call('PEXPIRE', holders, lease) end
return 1
