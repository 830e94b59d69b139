-- tag-drain: the first step of deleteByTag. Marks the tag invalidated now (so a load that
-- began before cannot enroll, hence cannot commit, under it afterwards) and moves its
-- members to the drain set, which the caller then scans, invalidating each member and
-- removing it from the drain once done. Loads enrolled from now on go to a new member set,
-- so the drain only shrinks while it is scanned (SSCAN returns every member present for
-- the whole scan), and a later deleteByTag merges into it what an interrupted one left.
--
-- KEYS[1]  members   <ns>:tag:{t:<tag>}:keys
-- KEYS[2]  at        <ns>:tag:{t:<tag>}:at
-- KEYS[3]  drain     <ns>:tag:{t:<tag>}:drain
-- ARGV[1]  retention ms to keep `at`: the longest a load may still commit (lock.maxHold + lock.lease)
-- ARGV[2]  broadcast the tag channel (with the client's key prefix), '' for none
-- ARGV[3]  message   '<cache id>|<tag>': every other process drops its L1 entries carrying the tag.
--                    Published here, with the write, so an invalidation never succeeds untold.
--
-- Returns the invalidation time (server ms).

--# include ../../../redis/scripts/fields.lua

local members, at, drain = KEYS[1], KEYS[2], KEYS[3]
local now = serverClock()

-- Never backwards (a failover to a node whose clock is behind); an unreadable `at` counts as none.
local invalidated = integer(math.max(now, counted(stringAt(at), math.huge) or 0))
redis.call('SET', at, invalidated, 'PX', ARGV[1])

typeOrDelete(drain, 'set')
if typeOrDelete(members, 'set') == 'set' then
  local membersLeft, drainLeft = redis.call('PTTL', members), redis.call('PTTL', drain)
  if drainLeft == -2 then
    redis.call('RENAME', members, drain) -- keeps the members' expiry
  else
    -- Added in place (not SUNIONSTORE, which would replace the set another deleteByTag may be scanning).
    local moved = redis.call('SMEMBERS', members)
    for i = 1, #moved, 1000 do redis.call('SADD', drain, unpack(moved, i, math.min(i + 999, #moved))) end
    redis.call('DEL', members)
    if membersLeft > drainLeft then redis.call('PEXPIRE', drain, membersLeft) end
  end
end

if ARGV[2] ~= '' then redis.call('PUBLISH', ARGV[2], ARGV[3]) end
return invalidated
