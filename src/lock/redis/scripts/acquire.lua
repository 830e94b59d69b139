-- acquire: take the lock if it is free, with a fencing token issued here, in the same step.
--
-- KEYS[1]  lock     <ns>:{l:<key>}:lock   string "<owner>:<token>", PX lease
-- KEYS[2]  counter  <ns>:{l:<key>}        string: the last token issued for this key
-- ARGV[1]  owner    128 random bits (hex), new for each acquisition
-- ARGV[2]  lease    ms, integer in 1 .. 2^31-1
-- ARGV[3]  keep     ms to keep the counter after this acquisition
--
-- Returns {1, token} when taken (token as a decimal string), or when this owner took it
-- already (a resent attempt); {0, pttl} when another owner holds it (pttl in ms).
--
-- The token follows the shared rule (nextTokenAfter in src/redis/scripts/fields.lua): strictly
-- increasing per key, and still increasing after the counter expired or Redis restarted empty,
-- since it then starts from the clock. The counter's expiry only bounds memory. A counter that
-- is not a token (garbage, a foreign type, or further ahead of the clock than any token issued)
-- is corrupt and restarts from the clock too.

--# include ../../../redis/scripts/fields.lua

local lock, counter = KEYS[1], KEYS[2]
local owner, lease, keep = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
if not lease or lease < 1 or lease > 2147483647 or lease % 1 ~= 0 then
  return redis.error_reply('ERR stampede-guard acquire: lease must be an integer in 1..2^31-1 ms')
end
if not keep or keep < lease or keep % 1 ~= 0 then
  return redis.error_reply('ERR stampede-guard acquire: keep must be an integer >= lease')
end

-- A lock of a foreign type is not ours and is deleted; one without an expiry is given one.
if typeOrDelete(lock, 'string') == 'string' then
  -- This very attempt, run a second time (ioredis resends a command whose reply a connection
  -- reset lost): the same answer, its lock, not "busy" and a lock nobody owns for a lease.
  local value = redis.call('GET', lock)
  if string.sub(value, 1, #owner + 1) == owner .. ':' then return {1, string.sub(value, #owner + 2)} end
  local pttl = heldFor(lock, lease)
  return {0, pttl}
end

local _, nowUs = serverClock()
local last = nil
if typeOrDelete(counter, 'string') == 'string' then last = tokenField(redis.call('GET', counter), nowUs) end
local text = integer(nextTokenAfter(nowUs, last))

redis.call('SET', counter, text, 'PX', keep)
redis.call('SET', lock, owner .. ':' .. text, 'PX', lease)
return {1, text}
