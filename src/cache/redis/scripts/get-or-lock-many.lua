-- getOrLockMany: get-or-lock.lua for many entries of one slot, in one call (getOrLoadMany).
-- Each entry is decided on its own, exactly as get-or-lock.lua decides it in mode 'read': a
-- fresh value is answered, a needed load takes the entry's lock and a fencing token, a lock
-- another process holds is reported with its PTTL. Nothing is shared between the entries but
-- the call, so one entry's state never changes another's answer.
--
-- KEYS[3i-2]  entry hash  <ns>:{tag}          of the i-th entry (see get-or-lock.lua)
-- KEYS[3i-1]  lock        <ns>:{tag}:lock
-- KEYS[3i]    fresh copy  <ns>:{tag}:v
-- ARGV[1]     lease       lock lease, ms
-- ARGV[2]     retention   ms to keep a hash that holds no value
-- ARGV[2+i]  owner        the i-th entry's owner: new for each lookup, the process's random bits
--                         and a counter (a retry of the entry alone, with get-or-lock.lua, keeps
--                         it: a lock that already holds it is won)
--
-- Returns one get-or-lock.lua reply per entry, in KEYS order:
--   {{state, lockState, lockArg, data, freshRem, graceRem, fallbackRem, loadMs, corrupt, ttlMs, now, version, fence}, ...}

--# include ../../../redis/scripts/fields.lua
--# include get-or-lock-entry.lua

local lease, retention = tonumber(ARGV[1]), tonumber(ARGV[2])
local replies = {}
for i = 1, #KEYS / 3 do
  local at = 3 * i
  replies[i] = getOrLockEntry(KEYS[at - 2], KEYS[at - 1], KEYS[at], ARGV[2 + i], lease, 'read', retention, -1)
end
return replies
