-- release-owner: compare-and-delete of a lock by its owner, then (optionally) wake the
-- waiters. A holder that lost the lock (it expired and another owner took it) deletes
-- nothing. Shared by the Redis lock backend (a holder's release) and by both the lock and
-- the cache to undo an abandoned attempt (src/redis/abandoned.ts).
--
-- KEYS[1]  lock     <ns>:{tag}:lock   string "<owner>:<token>"
-- KEYS[2]  channel  <ns>:{tag}:ch     waiters are subscribed here
-- ARGV[1]  owner    "<owner>:" — the prefix of the value we set. The owner is unique per
--                   acquisition, so this also releases a lock whose acquire reply we never
--                   saw (an abandoned attempt) without knowing its token.
-- ARGV[2]  notify   '1': publish on the channel (a holder's release), whether or not the lock
--                   was still here. '0': do not (undoing a failed attempt, e.g. a split
--                   Redlock vote: waking every waiter for it would only start the next split vote).
-- ARGV[3]  publish  'PUBLISH' or 'SPUBLISH' (sharded pub/sub on a Redis >= 7 Cluster: the
--                   channel is KEYS[2], in the lock's slot, so the message stays in its shard)
--
-- Returns 1 when the lock was ours and was deleted, else 0.

--# include fields.lua

local lock, channel, prefix = KEYS[1], KEYS[2], ARGV[1]
if #prefix < 2 or string.sub(prefix, -1) ~= ':' then
  return redis.error_reply('ERR stampede-guard release: owner must be "<owner>:"')
end
local released = 0
local value = stringAt(lock)
if value and string.sub(value, 1, #prefix) == prefix then
  redis.call('DEL', lock)
  released = 1
end
-- A holder's release publishes even when this node did not hold it (a Redlock node whose
-- vote was lost, or the lock expired): a waiter listening here must still hear of it, and
-- a spurious wake-up only costs it one re-check.
if ARGV[2] == '1' then
  local publish = ARGV[3] == 'SPUBLISH' and 'SPUBLISH' or 'PUBLISH'
  redis.call(publish, channel, 'r')
end
return released
