-- fields: reading what another client may have planted or corrupted in Redis. Included
-- (`--# include`, see src/redis/scripts.ts) by every script that reads a number back from
-- Redis; the repair rules are in docs/resilience.md ("Data planted in Redis").
-- Defines functions only: it sends no command, takes no KEYS or ARGV.

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

-- The string at `key`, false when there is none, or nil for a key of a foreign type
-- (which GET would answer with WRONGTYPE, failing the script).
local function stringAt(key)
  local value = redis.pcall('GET', key)
  if type(value) == 'table' then return nil end
  return value
end
