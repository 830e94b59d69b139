-- getOrLock: the whole hit-or-miss decision in one round trip.
-- Reads the entry by the Redis server clock and, when the caller needs a load,
-- tries the lock and hands out a fencing token.
--
-- KEYS[1]  entry hash  <ns>:{tag}   fields: d data, x fresh-until, s grace-until,
--                                    e fallback-until (all server ms), l load ms, t ttl ms,
--                                    f fence high-water mark, c token counter,
--                                    b backoff-until, p pass-until (hit-for-miss),
--                                    n negative-until + m its error message
-- KEYS[2]  lock        <ns>:{tag}:lock   value "<owner>:<token>", PX lease
-- ARGV[1]  owner       128 random bits, new for each lookup (kept across its retries: a lock
--                      already holding this owner is ours, won by an attempt whose reply was lost)
-- ARGV[2]  lease       lock lease, ms
-- ARGV[3]  mode        'read'    lock only when no fresh value (normal call)
--                      'refresh' lock unless held, even when fresh (early or background refresh)
--                      'token'   no lock, only a fencing token (a waiter that gave up and loads itself)
-- ARGV[4]  retention   ms to keep a hash that holds no value (counter, markers)
-- ARGV[5]  refreshBelow  'refresh' mode only: skip the refresh (answer 'none' with the value)
--                      when the value is fresh for longer than this, in ms: another process
--                      refreshed it already. -1 = always refresh (corrupt data).
--
-- Returns {state, lockState, lockArg, data, freshRem, graceRem, fallbackRem, loadMs, corrupt, ttlMs}
--   state      'fresh' | 'grace' (serve stale now) | 'fallback' (stale kept for errors) | 'miss'
--   lockState  'none' | 'won' (lockArg = token) | 'held' (lockArg = lock PTTL)
--              | 'backoff' (lockArg = ms left; fail-safe backoff, serve the stale value)
--              | 'pass' (lockArg = ms left; hit-for-miss: load without queueing) | 'token'
--              | 'error' (lockArg = ms left; negative caching: data holds the error message)
--   corrupt    1 when foreign or malformed data was found (and removed from the decision)

local entry, lock = KEYS[1], KEYS[2]
local owner, lease, mode, retention = ARGV[1], tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4])
local refreshBelow = tonumber(ARGV[5])

local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)

local corrupt = 0
local kind = redis.call('TYPE', entry)['ok']
if kind ~= 'hash' and kind ~= 'none' then
  redis.call('DEL', entry)
  corrupt = 1
end

local f = redis.call('HMGET', entry, 'd', 'x', 's', 'e', 'l', 'b', 'p', 'n', 'm', 't')
local data, x, s, e = f[1], tonumber(f[2]), tonumber(f[3]), tonumber(f[4])
local loadMs, backoffUntil, passUntil = tonumber(f[5]) or 0, tonumber(f[6]) or 0, tonumber(f[7]) or 0
local negativeUntil, negativeMessage, ttlMs = tonumber(f[8]) or 0, f[9], tonumber(f[10]) or 0

local state = 'miss'
if data and x and s and e then
  if now < x then state = 'fresh' elseif now < s then state = 'grace' elseif now < e then state = 'fallback' end
elseif data then
  corrupt = 1
end
if state == 'miss' then data, x, s, e = '', now, now, now end

-- Tokens are integers above 2^50; '%.0f' keeps every digit where tostring would not.
local function integer(n) return string.format('%.0f', n) end

local function reply(lockState, lockArg)
  return {state, lockState, integer(lockArg), data, x - now, s - now, e - now, loadMs, corrupt, ttlMs}
end

-- A token is the server time in microseconds, or the counter + 1 if that is higher
-- (two tokens in one microsecond). So a counter that expired with its hash, or that was
-- lost with a master whose last writes never reached the replica promoted in its place,
-- still hands out tokens above every one given before: tokens never repeat as long as the
-- nodes' clocks agree to within the time a failover takes.
local function nextToken()
  local token = redis.call('HINCRBY', entry, 'c', 1)
  local nowMicros = tonumber(time[1]) * 1000000 + tonumber(time[2])
  if token < nowMicros then
    token = nowMicros
    redis.call('HSET', entry, 'c', integer(token))
  end
  if state == 'miss' and redis.call('PTTL', entry) < retention then
    redis.call('PEXPIRE', entry, retention)
  end
  return token
end

if mode == 'read' then
  if state == 'fresh' then return reply('none', 0) end
  if now < passUntil then return reply('pass', passUntil - now) end
  if state == 'miss' and now < negativeUntil and negativeMessage then
    data = negativeMessage
    return reply('error', negativeUntil - now)
  end
end
if mode == 'refresh' and state == 'fresh' and refreshBelow >= 0 and x - now > refreshBelow then
  return reply('none', 0)
end
if mode ~= 'token' and state ~= 'miss' and now < backoffUntil then
  return reply('backoff', backoffUntil - now)
end
if mode == 'token' then return reply('token', nextToken()) end

-- Our own lock: an earlier attempt of this same lookup took it, and its reply was lost
-- (the master failed over after replicating it). Waiting for it would wait out our own lease.
local held = redis.pcall('GET', lock) -- pcall: a foreign non-string key is simply not ours
local mine = owner .. ':'
if type(held) == 'string' and string.sub(held, 1, #mine) == mine then
  return reply('won', tonumber(string.sub(held, #mine + 1)))
end

local pttl = redis.call('PTTL', lock)
if pttl ~= -2 then
  if pttl < 0 then pttl = lease end
  return reply('held', pttl)
end
local token = nextToken()
redis.call('SET', lock, owner .. ':' .. integer(token), 'PX', lease)
return reply('won', token)
