-- invalidate: delete the value and raise the fence above every token handed out so
-- far, so a load that started before this call cannot store its (possibly old)
-- result afterwards: stale-set protection, as memcache leases give. A lock in
-- flight is left alone; its commit is refused and its waiters re-check.
--
-- KEYS[1]  entry hash  <ns>:{tag}
-- KEYS[2]  fresh copy  <ns>:{tag}:v
-- ARGV[1]  retention   ms to keep the fence (longest time a leader may hold its lock)
-- ARGV[2]  broadcast   the invalidation channel (with the client's key prefix), '' for none
-- ARGV[3]  message     '<cache id>|<key>': every other process drops its L1 copy. Published
--                      here, with the write, so a delete never succeeds untold.
--
-- Returns 1 when it found a foreign key type or an unreadable counter c or fence f (the
-- fence is raised from the clock then, as from any counter it can read), else 0.

--# include ../../../redis/scripts/fields.lua

local entry = KEYS[1]
local _, nowMicros = serverClock()

local corrupt = 0
local highest = nowMicros
local kind, plantedEntry = typeOrDelete(entry, 'hash')
if plantedEntry then corrupt = 1 end
if kind == 'hash' then
  local stored = redis.call('HMGET', entry, 'c', 'f')
  for i = 1, 2 do
    local token = tokenField(stored[i], nowMicros)
    if token then highest = math.max(highest, token) elseif stored[i] then corrupt = 1 end
  end
end
local highWater = integer(highest)
redis.call('DEL', entry, KEYS[2])
redis.call('HSET', entry, 'c', highWater, 'f', highWater)
redis.call('PEXPIRE', entry, ARGV[1])
if ARGV[2] ~= '' then redis.call('PUBLISH', ARGV[2], ARGV[3]) end
return corrupt
