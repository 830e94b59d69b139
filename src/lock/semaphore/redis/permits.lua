-- permits: the live permits of a Redis semaphore. Included; defines functions only.
--
-- holders  zset  member "<owner>:<i>" (i = 0..count-1), score = server ms at which it expires
-- tokens   hash  owner -> its first token (the others follow it), while its permits live

-- Frees the permits that expired by `nowMs`, and any that no lease sets (planted past
-- nowMs + 2^32 ms, twice the longest lease: slack for a server clock stepped back), which
-- would never expire; forgets their owners' tokens.
local function prunePermits(holders, tokens, nowMs)
  for _, range in ipairs({{'-inf', nowMs}, {'(' .. (nowMs + 4294967296), '+inf'}}) do
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
