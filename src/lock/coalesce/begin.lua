-- begin: start a coalesced run of a job unless one is running; if one is, mark it pending,
-- so the running instance runs the job once more when it finishes.
--
-- KEYS[1]  running  <ns>:{c:<name>}          string: the runner's owner, PX lease
-- KEYS[2]  pending  <ns>:{c:<name>}:pending  string '1': a trigger came while it ran
-- ARGV[1]  owner    128 random bits (hex), new for each call
-- ARGV[2]  lease    ms, integer in 1 .. 2^31-1
-- ARGV[3]  keep     ms a pending mark stands without a runner to take it (its bound)
--
-- Returns 1 when this call runs the job, 0 when it was marked pending for the runner.

local running, pending, owner = KEYS[1], KEYS[2], ARGV[1]
local lease, keep = tonumber(ARGV[2]), tonumber(ARGV[3])
if not lease or lease < 1 or lease % 1 ~= 0 or not keep or keep < 1 then
  return redis.error_reply('ERR stampede-guard coalesce: lease and keep must be integers >= 1 ms')
end
local kind = redis.call('TYPE', running)['ok']
if kind == 'string' and redis.call('PTTL', running) > 0 then
  redis.call('SET', pending, '1', 'PX', keep)
  return 0
end
if kind ~= 'none' then redis.call('DEL', running) end -- planted, or without an expiry
redis.call('SET', running, owner, 'PX', lease)
redis.call('DEL', pending)
return 1
