-- permits: the live permits of a Redis semaphore. Included; defines functions only.
--
-- holders  zset  member "<owner>:<i>" (i = 0..count-1), score = server ms at which it expires
-- tokens   hash  owner -> its first token (the others follow it), while its permits live

-- Frees the permits that expired by `nowMs`, and any no lease sets (past nowMs + 2^31-1 ms,
-- planted: it would never expire), forgetting their owners' tokens.
local function prunePermits(holders, tokens, nowMs)
  for _, range in ipairs({{'-inf', nowMs}, {'(' .. (nowMs + 2147483647), '+inf'}}) do
    local expired = redis.call('ZRANGEBYSCORE', holders, range[1], range[2])
    if #expired > 0 then
      for _, member in ipairs(expired) do
        local owner = string.match(member, '^(.*):0$')
        if owner then redis.call('HDEL', tokens, owner) end
      end
      redis.call('ZREMRANGEBYSCORE', holders, range[1], range[2])
    end
  end
end
