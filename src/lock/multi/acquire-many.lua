-- acquire-many: take several locks in one step, all or none (withLocks, keys of one slot).
-- Each lock is the mutex's own (acquire.lua): the same key, value and token counter, so a
-- withLock on one of these keys excludes and is excluded as usual.
--
-- KEYS[2i-1]  lock     <ns>:{l:<key i>}:lock   string "<owner>:<token>", PX lease
-- KEYS[2i]    counter  <ns>:{l:<key i>}        string: the last token issued for key i
-- ARGV[1]     owner    128 random bits (hex), new for each attempt, the same for every key
-- ARGV[2]     lease    ms, integer in 1 .. 2^31-1
-- ARGV[3]     keep     ms to keep each counter after this acquisition (>= lease)
--
-- Returns {1, token 1, token 2, …} when every lock was free and is now taken, or
-- {0, i, pttl} when lock i is held by another owner (pttl in ms): nothing is taken then.

--# include ../../redis/scripts/fields.lua
--# include ../redis/scripts/token.lua

local owner, lease, keep = ARGV[1], checkedMs(ARGV[2], 'lease'), checkedMs(ARGV[3], 'keep')
if keep < lease then return redis.error_reply('ERR stampede-guard acquire-many: keep must be >= lease') end
for i = 1, #KEYS, 2 do
  local lock = KEYS[i]
  local kind = redis.call('TYPE', lock)['ok']
  if kind == 'string' then
    local pttl = redis.call('PTTL', lock)
    if pttl < 0 then
      -- Planted or left without an expiry: it ends like any lease instead of blocking forever.
      redis.call('PEXPIRE', lock, lease)
      pttl = lease
    end
    return {0, (i + 1) / 2, pttl}
  elseif kind ~= 'none' then
    redis.call('DEL', lock) -- not a lock of ours
  end
end
local _, nowUs = serverClock()
local tokens = {1}
for i = 1, #KEYS, 2 do
  local token = nextToken(KEYS[i + 1], nowUs, keep)
  redis.call('SET', KEYS[i], owner .. ':' .. token, 'PX', lease)
  tokens[#tokens + 1] = token
end
return tokens
