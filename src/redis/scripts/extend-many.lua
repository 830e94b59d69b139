-- extend-many: renew many leases in one call, each only if its lock is still ours
-- (compare-and-PEXPIRE). A process holding many locks renews them together, one call per
-- renewal tick (per slot on a Cluster), instead of one call per lock.
--
-- KEYS[i]     lock       <ns>:{tag}:lock of the i-th lock (any number, all in one slot on a Cluster)
-- ARGV[2i-1]  lockValue  "<owner>:<token>" we hold for KEYS[i]
-- ARGV[2i]    lease      its new lease, ms
--
-- Returns one entry per lock: 1 when extended, 0 when the lock is gone or someone else's (a
-- key of a foreign type included: pcall, since GET would fail the script, and with it every
-- other lock of the call, with WRONGTYPE).

local renewed = {}
for i, lock in ipairs(KEYS) do
  if redis.pcall('GET', lock) == ARGV[2 * i - 1] then
    redis.call('PEXPIRE', lock, ARGV[2 * i])
    renewed[i] = 1
  else
    renewed[i] = 0
  end
end
return renewed
