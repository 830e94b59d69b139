-- permits: the live permits of a Redis semaphore. Included; defines functions only.
--
-- holders  zset  member "<owner>:<i>" (i = 0..count-1), score = server ms at which it expires
-- tokens   hash  owner -> its first token (the others follow it), while its permits live

-- Frees the permits that expired by `nowMs`, forgetting their owners' tokens.
local function prunePermits(holders, tokens, nowMs)
  local expired = redis.call('ZRANGEBYSCORE', holders, '-inf', nowMs)
  if #expired == 0 then return end
  for _, member in ipairs(expired) do
    local owner = string.match(member, '^(.*):0$')
    if owner then redis.call('HDEL', tokens, owner) end
  end
  redis.call('ZREMRANGEBYSCORE', holders, '-inf', nowMs)
end
