-- release: give the lock back without a value (the loader failed, or its result is
-- not cacheable), and tell the waiters why. Does nothing unless we still hold the lock,
-- so a leader that lost its lease cannot disturb the next leader's waiters.
--
-- KEYS[1]  entry hash  <ns>:{tag}
-- KEYS[2]  lock        <ns>:{tag}:lock
-- KEYS[3]  channel     <ns>:{tag}:ch
-- ARGV[1]  lockValue   "<owner>:<token>" we hold
-- ARGV[2]  message     'e|["<name>","<message>"]' loader error (JSON after 'e|', so no
--                      character can break the frame; see src/loader-error.ts), 'u|' not
--                      cacheable (waiters load for themselves), 'r|' plain re-check
-- ARGV[3]  backoffMs   fail-safe backoff to store when a value is kept (0 = none)
-- ARGV[4]  passMs      hit-for-miss window to store (0 = none)
-- ARGV[5]  publish     'PUBLISH' or 'SPUBLISH'
-- ARGV[6]  negativeMs  negative caching: for this long, callers with no stale value get the
--                      loader error (ARGV[2]) at once instead of retrying in turn (0 = none)
--
-- Returns {released, corrupt}: released 1 if the lock was ours and was released, else 0;
-- corrupt 1 when a lock key of a foreign type, or an entry hash without an expiry, was found
-- (the first is deleted, the second given one).

--# include ../../../redis/scripts/fields.lua

local entry, lock, channel = KEYS[1], KEYS[2], KEYS[3]
local lockValue, message, publish = ARGV[1], ARGV[2], ARGV[5]
local backoffMs, passMs, negativeMs = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[6])

local held, foreignLock = lockValueAt(lock)
if foreignLock then return {0, 1} end
if held ~= lockValue then return {0, 0} end
redis.call('DEL', lock)

local now = serverClock()
local corrupt = 0

local kind = redis.call('TYPE', entry)['ok']
if kind == 'none' and negativeMs > 0 then kind = 'hash' end
if kind == 'hash' then
  if negativeMs > 0 then
    redis.call('HSET', entry, 'n', integer(now + negativeMs), 'm', message)
    if redis.call('PTTL', entry) < negativeMs then redis.call('PEXPIRE', entry, negativeMs) end
  end
  if backoffMs > 0 and redis.call('HEXISTS', entry, 'd') == 1 then
    redis.call('HSET', entry, 'b', integer(now + backoffMs))
    -- Every hash ends with an expiry: one that had none was planted (get-or-lock.lua drops its value).
    if redis.call('PTTL', entry) == -1 then
      redis.call('PEXPIRE', entry, backoffMs)
      corrupt = 1
    end
  end
  if passMs > 0 then
    redis.call('HSET', entry, 'p', integer(now + passMs))
    if redis.call('PTTL', entry) < passMs then redis.call('PEXPIRE', entry, passMs) end
  end
end
redis.call(publish, channel, message)
return {1, corrupt}
