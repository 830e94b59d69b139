-- token: the fencing tokens of a lock or a semaphore, issued inside its acquire script.
-- Included after fields.lua (tokenField, integer); defines functions only.

-- Issues `count` consecutive tokens from max(last + 1, server µs) and keeps the last one in
-- `counter` for `keep` ms; returns the first. Strictly increasing per counter, and still
-- increasing after the counter expired or Redis restarted empty (it then restarts from the
-- clock, past every token issued before). A counter that is no token restarts from the clock.
local function issueTokens(counter, nowUs, count, keep)
  local last = nil
  local kind = redis.call('TYPE', counter)['ok']
  if kind == 'string' then
    last = tokenField(redis.call('GET', counter), nowUs)
  elseif kind ~= 'none' then
    redis.call('DEL', counter)
  end
  local first = math.max((last or 0) + 1, nowUs)
  redis.call('SET', counter, integer(first + count - 1), 'PX', keep)
  return first
end
