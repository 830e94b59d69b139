-- fair acquire: take the lock if it is free and no waiter is ahead in line (FIFO), with a
-- fencing token issued here; else join the line (or keep its place) and beat. The lock is
-- the same string as the unfair lock's (acquire.lua), so the two modes still exclude each
-- other on one key (though an unfair acquire ignores the line).
--
-- KEYS[1]  lock     <ns>:{l:<key>}:lock   string "<owner>:<token>", PX lease
-- KEYS[2]  counter  <ns>:{l:<key>}        string: the last token issued
-- KEYS[3]  queue    <ns>:{l:<key>}:q      zset, see queue.lua
-- KEYS[4]  beats    <ns>:{l:<key>}:b      zset, see queue.lua
-- KEYS[5]  wake     <ns>:{l:<key>}:w:     prefix of each waiter's channel (same slot)
-- ARGV[1]  owner    128 random bits (hex), new for each acquisition
-- ARGV[2]  lease    ms, integer in 1..2^31-1
-- ARGV[3]  keep     ms to keep the counter after this acquisition (>= lease)
-- ARGV[4]  beat     ms a waiter stays in line without another attempt; 0 = do not join (tryAcquire)
-- ARGV[5]  publish  'PUBLISH' or 'SPUBLISH'
--
-- Returns {1, token} when taken, {0, pttl} while held (ms; -1 when it is free but another
-- waiter is first in line). The same attempt run twice (resent after a connection reset
-- lost its reply), or an attempt of a head the lock was handed to (release.lua), answers
-- {1, token}: its lock, not "busy" and a lock nobody owns.

--# include ../../../redis/scripts/fields.lua
--# include ../scripts/token.lua
--# include ../../semaphore/redis/queue.lua

local lock, counter, queue, beats, prefix = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local owner, publish = ARGV[1], ARGV[5]
local lease, keep, beat = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
if not lease or lease < 1 or lease > 2147483647 or lease % 1 ~= 0 then
  return redis.error_reply('ERR stampede-guard fair acquire: lease must be an integer in 1..2^31-1 ms')
end
if not keep or keep < lease or keep % 1 ~= 0 or not beat or beat < 0 or beat > 2147483647 or beat % 1 ~= 0 then
  return redis.error_reply('ERR stampede-guard fair acquire: keep must be >= lease, beat an integer >= 0')
end

local nowMs, nowUs = serverClock()
zsetOnly(queue)
zsetOnly(beats)
pruneWaiters(queue, beats, nowMs)

local kind = redis.call('TYPE', lock)['ok']
if kind == 'string' then
  local value = redis.call('GET', lock)
  if string.sub(value, 1, #owner + 1) == owner .. ':' then
    -- Ours: a resent attempt, or a hand-off whose message this attempt overtook. Its lease
    -- counts from this attempt (which the caller's watchdog counts from), not from before.
    redis.call('PEXPIRE', lock, lease)
    return {1, string.sub(value, #owner + 2)}
  end
  local pttl = redis.call('PTTL', lock)
  if pttl < 0 then
    redis.call('PEXPIRE', lock, lease) -- planted without an expiry: it ends like any lease
    pttl = lease
  end
  if beat > 0 then enqueue(queue, beats, owner, nowUs, nowMs, beat) end
  return {0, pttl}
elseif kind ~= 'none' then
  redis.call('DEL', lock) -- not a lock of ours
end

local head = headOf(queue)
if head ~= nil and head ~= owner then
  if beat > 0 then enqueue(queue, beats, owner, nowUs, nowMs, beat) end
  -- Free, and its turn: the head may have missed its message (or its predecessor died in line).
  wake(prefix, head, publish)
  return {0, -1}
end

local text = integer(issueTokens(counter, nowUs, 1, keep))
redis.call('SET', lock, owner .. ':' .. text, 'PX', lease)
leave(queue, beats, owner)
return {1, text}
