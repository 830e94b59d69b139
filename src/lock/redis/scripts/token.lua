-- token: the fencing tokens of a lock or a semaphore, issued inside its acquire script.
-- Included after fields.lua (typeOrDelete, tokenField, nextTokenAfter, integer); defines functions only.

-- Issues `count` consecutive tokens by the shared rule (nextTokenAfter) and keeps the last one
-- in `counter` for `keep` ms; returns the first. A counter of a foreign type is deleted, and one
-- that is no token restarts from the clock.
local function issueTokens(counter, nowUs, count, keep)
  local last = nil
  if typeOrDelete(counter, 'string') == 'string' then last = tokenField(redis.call('GET', counter), nowUs) end
  local first = nextTokenAfter(nowUs, last)
  redis.call('SET', counter, integer(first + count - 1), 'PX', keep)
  return first
end
