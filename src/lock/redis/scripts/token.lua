-- token: the fencing-token and argument rules of the lock scripts (mutex, fair lock, semaphore,
-- multi-key, read-write), issued inside their acquire scripts.
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

-- One token, as a decimal string (acquire.lua, acquire-many.lua, the read-write scripts).
local function nextToken(counter, nowUs, keep)
  return integer(issueTokens(counter, nowUs, 1, keep))
end

-- A duration argument in ms, checked: an integer in 1..2^31-1, else the script fails naming it.
local function checkedMs(text, name)
  local ms = tonumber(text)
  if not ms or ms < 1 or ms > 2147483647 or ms % 1 ~= 0 then
    error('stampede-guard lock: ' .. name .. ' must be an integer in 1..2^31-1 ms')
  end
  return ms
end
