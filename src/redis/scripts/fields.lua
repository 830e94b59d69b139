-- fields: reading what another client may have planted or corrupted in Redis, and the rules
-- every script that repairs it or hands out a token follows. Included (`--# include`, see
-- src/redis/scripts.ts) by the cache's scripts and the lock's alike; the repair rules are in
-- docs/resilience.md ("Data planted in Redis").
-- Defines functions only: it sends no command itself, takes no KEYS or ARGV.

-- Integers go out as '%.0f': tokens are above 2^50, where tostring would round them.
local function integer(n) return string.format('%.0f', n) end

-- The server clock, in ms and in µs.
local function serverClock()
  local time = redis.call('TIME')
  local seconds, micros = tonumber(time[1]), tonumber(time[2])
  return seconds * 1000 + math.floor(micros / 1000), seconds * 1000000 + micros
end

-- A decimal integer in 0..max, else nil. Digits only: Lua's tonumber also takes a sign,
-- exponents (1e400 is inf), hex, 'inf' and 'nan'. At most 16 digits, so exact as a double.
local function counted(text, max)
  if type(text) ~= 'string' or #text > 16 or not string.find(text, '^%d+$') then return nil end
  local n = tonumber(text)
  if n > max then return nil end
  return n
end

-- A token is the server clock in µs, or the last token + 1 when that is higher: it runs
-- ahead of the clock only by the tokens issued within one µs. A counter or fence further
-- ahead than this was never issued (a clock stepped back this far would break tokens
-- anyway, once a counter expires), so it counts as corrupt.
local TOKEN_AHEAD_US = 3600 * 1000000

-- A fencing token (a counter `c`, a fence `f`) read back, else nil.
local function tokenField(text, nowMicros) return counted(text, nowMicros + TOKEN_AHEAD_US) end

-- The next fencing token: the server time in µs, or the last token issued (`counter`) + 1 if
-- that is higher (two tokens in one µs), and always above `fence` (every token a delete
-- refused). So a counter that expired with its key, or that was lost with a master whose last
-- writes never reached the replica promoted in its place, still hands out tokens above every
-- one given before: tokens never repeat as long as the nodes' clocks agree to within the time
-- a failover takes. `counter` and `fence` may be nil (none, or unreadable).
local function nextTokenAfter(nowMicros, counter, fence)
  return math.max((counter or 0) + 1, (fence or 0) + 1, nowMicros)
end

-- The string at `key`, false when there is none, or nil for a key of a foreign type
-- (which GET would answer with WRONGTYPE, failing the script).
local function stringAt(key)
  local value = redis.pcall('GET', key)
  if type(value) == 'table' then return nil end
  return value
end

-- The type of `key`, after deleting what is there when it is neither of type `expected` nor
-- absent (planted by another client: no script of ours reads it then). Returns the type ('none'
-- once deleted) and true when it deleted something.
local function typeOrDelete(key, expected)
  local kind = redis.call('TYPE', key)['ok']
  if kind == expected or kind == 'none' then return kind, false end
  redis.call('DEL', key)
  return 'none', true
end

-- The fields `...` of the hash at `key` (HMGET), after deleting what is there when it is not a
-- hash (planted by another client): one command where TYPE then HMGET were two. Returns the
-- fields (none once deleted) and true when it deleted something.
local function hashFieldsOrDelete(key, ...)
  local fields = redis.pcall('HMGET', key, ...)
  if fields['err'] == nil then return fields, false end
  redis.call('DEL', key)
  return {}, true
end

-- A lock (or claim) string: its value, or false when there is none. One of a foreign type is
-- nobody's lock: it is deleted (the second result is then true) and read as none.
local function lockValueAt(key)
  local value = stringAt(key)
  if value ~= nil then return value, false end
  redis.call('DEL', key)
  return false, true
end

-- How long the held lock (or claim) at `key` still lasts, in ms. One planted or left without
-- an expiry is given `lease`, so it ends like any lease instead of blocking every caller for
-- ever (the second result is then true).
local function heldFor(key, lease)
  local ttl = redis.call('PTTL', key)
  if ttl >= 0 then return ttl, false end
  redis.call('PEXPIRE', key, lease)
  return lease, true
end
