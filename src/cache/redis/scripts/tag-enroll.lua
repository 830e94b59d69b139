-- tag-enroll: records, before an entry's commit, that the entry carries a tag, unless the
-- tag was invalidated after the load began: then the value may predate the invalidation
-- and must not be committed (see docs/tags.md for the race analysis). One call per tag,
-- on the tag's own slot: no script touches two slots.
--
-- KEYS[1]  members     <ns>:tag:{t:<tag>}:keys   set of the cache keys (as given to getOrLoad) tagged with it
-- KEYS[2]  at          <ns>:tag:{t:<tag>}:at     string: server ms of the tag's last invalidation
-- ARGV[1]  key         the cache key to enroll
-- ARGV[2]  startedAt   server ms when the load began, less the clock-skew allowance (tagClockSkew)
-- ARGV[3]  lifeMs      how long the entry may live from now (its fallback-until): the member set
--                      is kept at least this long, so it outlives every member's value
-- ARGV[4]  maxMembers  budget of members per tag (maxKeysPerTag)
--
-- Returns 1 (enrolled), 0 (invalidated at or after startedAt, or `at` unreadable: do not commit),
-- -1 (the set already holds maxMembers other keys: do not commit).

--# include ../../../redis/scripts/fields.lua

local members, at = KEYS[1], KEYS[2]
local key, startedAt, lifeMs, maxMembers = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])

local text = stringAt(at)
local invalidated = counted(text, math.huge)
if text ~= false and not invalidated then
  -- Foreign data where the invalidation time belongs (a foreign type, or not a decimal
  -- integer): whatever it meant, refuse this once.
  redis.call('DEL', at)
  return 0
end
if (invalidated or 0) >= startedAt then return 0 end

typeOrDelete(members, 'set')
if redis.call('SISMEMBER', members, key) == 0 then
  if redis.call('SCARD', members) >= maxMembers then return -1 end
  redis.call('SADD', members, key)
end
-- Never shortened: the set must outlive its longest-lived member (-1, no expiry, is replaced).
if redis.call('PTTL', members) < lifeMs then redis.call('PEXPIRE', members, lifeMs) end
return 1
