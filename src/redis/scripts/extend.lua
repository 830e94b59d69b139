-- extend: renew the lease, only if the lock is still ours (compare-and-PEXPIRE).
--
-- KEYS[1]  lock       <ns>:{tag}:lock
-- ARGV[1]  lockValue  "<owner>:<token>" we hold
-- ARGV[2]  lease      new lease, ms
--
-- Returns 1 when extended, 0 when the lock is gone or someone else's (a key of a foreign
-- type included: pcall, since GET would fail the script with WRONGTYPE).

if redis.pcall('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
