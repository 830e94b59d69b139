-- invalidate-before: a queued delete, replayed (the delete outbox). It erases what was
-- loaded or set before the delete was asked for, and nothing newer: a replay never erases
-- a value written after it. Tokens are the server clock in µs (or just above it), so a
-- value whose fence `f` is below `before` was written with a token issued before the delete.
--
-- KEYS[1]  entry hash  <ns>:{tag}
-- KEYS[2]  fresh copy  <ns>:{tag}:v
-- ARGV[1]  before      server µs when the delete was asked for (this process's estimate)
-- ARGV[2]  retention   ms to keep the fence (longest time a leader may hold its lock)
-- ARGV[3]  broadcast   the invalidation channel (with the client's key prefix), '' for none
-- ARGV[4]  message     '<cache id>|<key>': every other process drops its L1 copy (published
--                      whether or not a value was erased: an L1 copy may predate the delete)
--
-- Erasing is invalidate.lua's, with the fence raised to `before` rather than to every token
-- issued: a load that began before the delete cannot commit after the replay, one that began
-- after it can. Returns {erased, corrupt}: erased 1 when what the key held was erased (now or by
-- an earlier attempt of this same delete, whose fence is exactly `before`), 0 when a newer value
-- (or a later delete's fence) was kept; corrupt 1 when a foreign type or unreadable field was repaired.

--# include ../../../redis/scripts/fields.lua

local entry = KEYS[1]
local _, nowMicros = serverClock()
local before = counted(ARGV[1], nowMicros + TOKEN_AHEAD_US) or nowMicros

local corrupt = 0
local counter, fence
local kind, plantedEntry = typeOrDelete(entry, 'hash')
if plantedEntry then corrupt = 1 end
if kind == 'hash' then
  local stored = redis.call('HMGET', entry, 'c', 'f')
  counter = tokenField(stored[1], nowMicros)
  fence = tokenField(stored[2], nowMicros)
  if (stored[1] and not counter) or (stored[2] and not fence) then corrupt = 1 end
end

local erased = 0
if fence == before then
  erased = 1 -- this very delete ran already (an attempt that got no answer, run late): done
elseif (fence or 0) < before then
  redis.call('DEL', entry, KEYS[2])
  redis.call('HSET', entry, 'c', integer(math.max(counter or 0, before)), 'f', integer(before))
  redis.call('PEXPIRE', entry, ARGV[2])
  erased = 1
end
if ARGV[3] ~= '' then redis.call('PUBLISH', ARGV[3], ARGV[4]) end
return { erased, corrupt }
