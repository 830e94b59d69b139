-- release: give back a read or write lock (or a waiting writer's claim), then wake the
-- waiters. Never touches another holder's.
--
-- KEYS[1]  readers  <ns>:{rw:<name>}:readers
-- KEYS[2]  writer   <ns>:{rw:<name>}:writer
-- KEYS[3]  wanted   <ns>:{rw:<name>}:wanted
-- KEYS[4]  channel  <ns>:{rw:<name>}:ch
-- ARGV[1]  kind     'r' (a reader), 'w' (the writer) or 'g' (a waiting writer gives up)
-- ARGV[2]  owner    the holder's owner
-- ARGV[3]  publish  'PUBLISH' or 'SPUBLISH' (sharded pub/sub on a Redis >= 7 Cluster)
--
-- Returns 1 when something of this owner was removed, else 0.

local readers, writer, wanted, channel = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local kind, owner = ARGV[1], ARGV[2]
local removed = 0
if kind == 'r' then
  removed = redis.pcall('ZREM', readers, owner)
elseif kind == 'w' then
  local value = redis.pcall('GET', writer)
  if type(value) == 'string' and string.sub(value, 1, #owner + 1) == owner .. ':' then
    redis.call('DEL', writer)
    removed = 1
  end
end
if type(removed) ~= 'number' then removed = 0 end
removed = math.max(removed, redis.pcall('ZREM', wanted, owner))
redis.call(ARGV[3] == 'SPUBLISH' and 'SPUBLISH' or 'PUBLISH', channel, 'r')
return removed
