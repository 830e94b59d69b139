-- commit: fenced write + lock release + notification, atomically.
-- A value is written only if its token is above the fence high-water mark, so a
-- leader that stalled past its lease (or a load that began before an invalidation)
-- can never overwrite a newer value.
--
-- KEYS[1]  entry hash  <ns>:{tag}
-- KEYS[2]  lock        <ns>:{tag}:lock
-- KEYS[3]  channel     <ns>:{tag}:ch   (declared as a key so Cluster routes SPUBLISH to this slot)
-- KEYS[4]  fresh copy  <ns>:{tag}:v    string 'x|s|e|l|t|f|data', PX = freshMs: what a plain GET reads
-- ARGV[1]  lockValue   "<owner>:<token>" we hold, or '' when we hold no lock
-- ARGV[2]  token       fencing token, or '' to take a new one now (a plain set)
-- ARGV[3]  data        encoded value
-- ARGV[4]  freshMs     fresh for this long from now (ttl)
-- ARGV[5]  graceMs     served stale at once until this long from now (ttl + staleTtl)
-- ARGV[6]  fallbackMs  kept as fail-safe fallback until this long from now (≥ graceMs)
-- ARGV[7]  loadMs      how long the load took (XFetch's delta)
-- ARGV[8]  publish     'PUBLISH' or 'SPUBLISH'
-- ARGV[9]  broadcast   set() only: the invalidation channel (with the key prefix), '' for none
-- ARGV[10] message     set() only: '<cache id>|<key>', published (plain PUBLISH) when written
--
-- Returns {written, released, now, token, corrupt}; corrupt is 1 when a foreign key type, an
-- unreadable counter c or fence f, or a lock key of a foreign type was found (and repaired,
-- or refused: see below). Publishes 'c|now|x|s|e|l|t|f|data' (the fresh copy
-- after the server time) when written, or 'r|' (re-check) when only the lock was released.
-- A record over NOTICE_ABOVE bytes is not sent through the channel (every subscriber's
-- output buffer would hold a copy, and past Redis's pub/sub limit the subscriber is dropped):
-- 'n|now' (a notice) tells waiters to read the fresh copy with one GET instead.

--# include ../../../redis/scripts/fields.lua

local entry, lock, channel, fresh = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local lockValue, data, publish = ARGV[1], ARGV[3], ARGV[8]
local freshMs, graceMs, fallbackMs, loadMs = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])

local now, nowMicros = serverClock()
local NOTICE_ABOVE = 65536 -- bytes; docs/resilience.md

local corrupt = 0
-- b, p, n and m are read only to know whether there are markers to delete.
local stored, plantedEntry = hashFieldsOrDelete(entry, 'c', 'f', 'b', 'p', 'n', 'm')
if plantedEntry then corrupt = 1 end
local counter, highWater = tokenField(stored[1], nowMicros), tokenField(stored[2], nowMicros)
if stored[1] and not counter then corrupt = 1 end
if stored[2] and not highWater then
  -- A fence we cannot read: as if the key was invalidated now, so every token issued before
  -- is refused (the next lookup writes the repair), and a plain set() still gets above it.
  highWater = math.max(counter or 0, nowMicros)
  corrupt = 1
end
highWater = highWater or 0

local token = ARGV[2]
if token == '' then
  token = integer(nextTokenAfter(nowMicros, counter, highWater))
end

local written = 0
local record = ''
if tonumber(token) > highWater then
  local x = now + freshMs
  local s = now + graceMs
  local e = now + math.max(graceMs, fallbackMs)
  local xText, sText, eText, loadText, ttlText = integer(x), integer(s), integer(e), integer(loadMs), integer(freshMs)
  -- The counter stays at or above every token: ours, when it was taken here or c was unreadable.
  -- (One HSET: each command a script sends costs Redis about a µs.)
  if ARGV[2] == '' or (stored[1] and not counter) then
    local c = integer(math.max(counter or 0, tonumber(token), nowMicros))
    redis.call('HSET', entry, 'd', data, 'x', xText, 's', sText, 'e', eText, 'l', loadText, 't', ttlText, 'f', token, 'c', c)
  else
    redis.call('HSET', entry, 'd', data, 'x', xText, 's', sText, 'e', eText, 'l', loadText, 't', ttlText, 'f', token)
  end
  if stored[3] or stored[4] or stored[5] or stored[6] then redis.call('HDEL', entry, 'b', 'p', 'n', 'm') end
  redis.call('PEXPIREAT', entry, eText)
  -- The fresh copy expires when the value stops being fresh, by this server's clock.
  record = xText .. '|' .. sText .. '|' .. eText .. '|' .. loadText .. '|' .. ttlText .. '|' .. token .. '|' .. data
  if freshMs >= 1 then redis.call('SET', fresh, record, 'PX', integer(freshMs)) else redis.call('DEL', fresh) end
  written = 1
end

local released = 0
local held, foreignLock = lockValueAt(lock)
if foreignLock then corrupt = 1 end
if lockValue ~= '' and held == lockValue then
  redis.call('DEL', lock)
  released = 1
end

if written == 1 then
  if #record > NOTICE_ABOVE then
    redis.call(publish, channel, 'n|' .. integer(now))
  else
    redis.call(publish, channel, 'c|' .. integer(now) .. '|' .. record)
  end
  if ARGV[9] ~= '' then redis.call('PUBLISH', ARGV[9], ARGV[10]) end
elseif released == 1 then
  redis.call(publish, channel, 'r|')
end
return {written, released, integer(now), token, corrupt}
