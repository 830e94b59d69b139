-- expire: soft invalidation. A fresh value becomes stale now, without disappearing: it keeps
-- its data, its version (the fence f) and its fallback window, and its fresh-until x becomes
-- now, its grace-until s now + (s - x), the stale window it was written with (staleTtl).
-- Readers then find it in grace: the first lookup takes the lock and reloads it, the others
-- are served it stale (get-or-lock.lua). Without a grace window (staleTtl 0) it is stale
-- past grace at once: the next lookup loads it and the others wait for that load.
--
-- It writes no data and no token: a delete before it (no data, fence raised) stays deleted,
-- and a commit after it is fresh; an entry that is not fresh (missing, deleted, already
-- stale, or unreadable) is left as it is. The fresh copy is deleted in every case, and the
-- invalidation broadcast published, so no process serves a fresh copy after this returns.
--
-- KEYS[1]  entry hash  <ns>:{tag}
-- KEYS[2]  fresh copy  <ns>:{tag}:v
-- ARGV[1]  broadcast   the invalidation channel (with the client's key prefix), '' for none
-- ARGV[2]  message     '<cache id>|<key>': every other process drops its L1 copy
--
-- Returns 1 when a fresh value was made stale, else 0.

--# include ../../../redis/scripts/fields.lua

local entry, fresh = KEYS[1], KEYS[2]
local now = serverClock()
local expired = 0
if redis.call('TYPE', entry).ok == 'hash' then
  local pttl = redis.call('PTTL', entry)
  if pttl > 0 then
    local horizon = now + pttl + 1000 -- no deadline past the hash's own expiry is trusted (get-or-lock-entry.lua)
    local f = redis.call('HMGET', entry, 'd', 'x', 's', 'e')
    local x, s, e = counted(f[2], horizon), counted(f[3], horizon), counted(f[4], horizon)
    if f[1] and x and s and e and now < x and x <= s and s <= e then
      redis.call('HSET', entry, 'x', integer(now), 's', integer(now + s - x))
      expired = 1
    end
  end
end
redis.call('DEL', fresh)
if ARGV[1] ~= '' then redis.call('PUBLISH', ARGV[1], ARGV[2]) end
return expired
