-- rw-common: what the read-write lock scripts share. Defines functions only: it sends no
-- command of its own, takes no KEYS or ARGV. Include it after src/redis/scripts/fields.lua.



-- A zset of ours, or nothing: a key of a foreign type (planted) is dropped, not fatal.
local function ownZset(key)
  local kind = redis.call('TYPE', key)['ok']
  if kind ~= 'zset' and kind ~= 'none' then redis.call('DEL', key) end
end

-- Readers and waiting writers whose lease or claim has ended are gone.
local function dropExpired(readers, wanted, now)
  ownZset(readers)
  ownZset(wanted)
  redis.call('ZREMRANGEBYSCORE', readers, '-inf', now)
  redis.call('ZREMRANGEBYSCORE', wanted, '-inf', now)
end

-- ms left of a string key (the writer), nil when there is none; a foreign type or one
-- without an expiry (planted) is dropped.
local function stringTtl(key)
  local kind = redis.call('TYPE', key)['ok']
  if kind == 'none' then return nil end
  local pttl = redis.call('PTTL', key)
  if kind ~= 'string' or pttl < 0 then
    redis.call('DEL', key)
    return nil
  end
  return math.max(1, pttl)
end

-- The zset lives as long as its last member's lease, so nothing outlives its holders.
local function keepUntilLast(key, now)
  local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if last[2] then redis.call('PEXPIRE', key, math.max(1, tonumber(last[2]) - now)) end
end
