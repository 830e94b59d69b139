-- rw-common: what the read-write lock scripts share. Defines functions only: it sends no
-- command of its own, takes no KEYS or ARGV. Include it after src/redis/scripts/fields.lua.



local function checkedMs(text, name)
  local ms = tonumber(text)
  if not ms or ms < 1 or ms > 2147483647 or ms % 1 ~= 0 then
    error('stampede-guard read-write: ' .. name .. ' must be an integer in 1..2^31-1 ms')
  end
  return ms
end

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

-- The next fencing token, as acquire.lua issues them: max(last + 1, server time in µs).
local function nextToken(counter, nowUs, keep)
  local last = nil
  local kind = redis.call('TYPE', counter)['ok']
  if kind == 'string' then
    last = tokenField(redis.call('GET', counter), nowUs)
  elseif kind ~= 'none' then
    redis.call('DEL', counter)
  end
  local text = integer(math.max((last or 0) + 1, nowUs))
  redis.call('SET', counter, text, 'PX', keep)
  return text
end
