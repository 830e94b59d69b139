-- invalidate: for each entry, delete the value and raise the fence above every token handed
-- out so far, so a load that started before this call cannot store its (possibly old) result
-- afterwards: stale-set protection, as memcache leases give. A lock in flight is left alone;
-- its commit is refused and its waiters re-check. The deletes of one tick come as one call
-- (one slot's worth on a Cluster) and are announced by one message.
--
-- KEYS[2i-1]  entry hash  <ns>:{tag}          (one pair per entry; on a Cluster, one slot)
-- KEYS[2i]    fresh copy  <ns>:{tag}:v
-- ARGV[1]  retention   ms to keep the fence (longest time a leader may hold its lock)
-- ARGV[2]  broadcast   the invalidation channel (with the client's key prefix), '' for none
-- ARGV[3]  message     '<cache id>|<JSON array of keys>': every other process drops its L1
--                      copies. Published here, with the writes, so a delete never succeeds untold.
--
-- Returns, per entry, 1 when it found a foreign key type or an unreadable counter c or fence f
-- (the fence is raised from the clock then, as from any counter it can read), else 0.

--# include ../../../redis/scripts/fields.lua

local _, nowMicros = serverClock()
local found = {}

for i = 1, #KEYS, 2 do
  local entry = KEYS[i]
  local corrupt = 0
  local highest = nowMicros
  local kind, plantedEntry = typeOrDelete(entry, 'hash')
  if plantedEntry then corrupt = 1 end
  if kind == 'hash' then
    local stored = redis.call('HMGET', entry, 'c', 'f')
    for j = 1, 2 do
      local token = tokenField(stored[j], nowMicros)
      if token then highest = math.max(highest, token) elseif stored[j] then corrupt = 1 end
    end
  end
  local highWater = integer(highest)
  redis.call('DEL', entry, KEYS[i + 1])
  redis.call('HSET', entry, 'c', highWater, 'f', highWater)
  redis.call('PEXPIRE', entry, ARGV[1])
  found[#found + 1] = corrupt
end
if ARGV[2] ~= '' then redis.call('PUBLISH', ARGV[2], ARGV[3]) end
return found
