-- finish: a run of a coalesced job ended. If a trigger came meanwhile, hand the claim to
-- the runner's next run (a fresh owner, a fresh lease); else end the run. Also called when
-- the runner lost its lease locally or in Redis: a pending trigger is never left behind by
-- a runner that gave up, and a claim is never extended for nobody.
--
-- KEYS[1]  running  <ns>:{c:<name>}
-- KEYS[2]  pending  <ns>:{c:<name>}:pending
-- ARGV[1]  owner    the ending run's owner
-- ARGV[2]  lease    ms, the fresh lease of a further run
-- ARGV[3]  next     the next run's owner, new for each finish (retries of one finish repeat it)
-- ARGV[4]  handOver '1': run a pending trigger as `next`; '0' (the runner is closing): free
--                   the claim and leave the pending mark to the next trigger
--
-- Returns 1: run again, as `next`; 0: done, the claim is free; -1: another runner holds the
-- claim (its lease ran out here and it was taken), so a pending trigger is that runner's.

local running, pending, owner, lease, next = KEYS[1], KEYS[2], ARGV[1], tonumber(ARGV[2]), ARGV[3]
local handOver = ARGV[4] == '1'
local current = redis.pcall('GET', running)
if current == next then return 1 end -- a retry of a finish that was applied
if type(current) == 'table' or (current and current ~= owner) then return -1 end
-- Ours, or free (our lease ran out and nobody began since: begin would have taken it).
if handOver and redis.call('EXISTS', pending) == 1 then
  redis.call('DEL', pending)
  redis.call('SET', running, next, 'PX', lease)
  return 1
end
if current then redis.call('DEL', running) end
return 0
