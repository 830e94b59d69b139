-- tokens: the fencing-token and argument rules the lock scripts under src/lock/ share.
-- Defines functions only: it sends no command, takes no KEYS or ARGV. Include it after
-- src/redis/scripts/fields.lua.

local function checkedMs(text, name)
  local ms = tonumber(text)
  if not ms or ms < 1 or ms > 2147483647 or ms % 1 ~= 0 then
    error('stampede-guard lock: ' .. name .. ' must be an integer in 1..2^31-1 ms')
  end
  return ms
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
