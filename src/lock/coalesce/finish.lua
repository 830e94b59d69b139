-- finish: a run of a coalesced job ended. If a trigger came meanwhile, keep running (the
-- caller runs the job once more, under a fresh lease); else end the run.
--
-- KEYS[1]  running  <ns>:{c:<name>}
-- KEYS[2]  pending  <ns>:{c:<name>}:pending
-- ARGV[1]  owner    the runner's owner
-- ARGV[2]  lease    ms, the fresh lease of a further run
--
-- Returns 1: run again; 0: done; -1: the run was not ours any more (its lease ran out).

local running, pending, owner, lease = KEYS[1], KEYS[2], ARGV[1], tonumber(ARGV[2])
if redis.pcall('GET', running) ~= owner then return -1 end
if redis.call('EXISTS', pending) == 1 then
  redis.call('DEL', pending)
  redis.call('PEXPIRE', running, lease)
  return 1
end
redis.call('DEL', running)
return 0
