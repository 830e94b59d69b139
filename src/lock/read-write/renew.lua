-- renew: extend one holder's lease, only while it is still that holder's (a reader that
-- expired is not brought back; a writer is compared by its whole value).
--
-- KEYS[1]  readers  <ns>:{rw:<name>}:readers
-- KEYS[2]  writer   <ns>:{rw:<name>}:writer
-- ARGV[1]  kind     'r' (a reader) or 'w' (the writer)
-- ARGV[2]  holder   the reader's owner, or the writer's "<owner>:<token>"
-- ARGV[3]  lease    ms from now
--
-- Returns 1 when extended, 0 when the lock is no longer this holder's.

--# include ../../redis/scripts/fields.lua
--# include ../redis/scripts/token.lua
--# include rw-common.lua

local readers, writer, kind, holder = KEYS[1], KEYS[2], ARGV[1], ARGV[2]
local lease = checkedMs(ARGV[3], 'lease')
local now = serverClock()
if kind == 'w' then
  if redis.pcall('GET', writer) ~= holder then return 0 end
  redis.call('PEXPIRE', writer, lease)
  return 1
end
local ends = tonumber(redis.pcall('ZSCORE', readers, holder))
if not ends or ends <= now then return 0 end
redis.call('ZADD', readers, 'XX', now + lease, holder)
keepUntilLast(readers, now)
return 1
