-- queue: the FIFO line of waiters kept in a lock's or semaphore's own keys, for the fair
-- Redis lock (src/lock/redis/fair/) and the Redis semaphore. Included (`--# include`);
-- defines functions only: it sends no command by itself and takes no KEYS or ARGV.
--
-- queue  zset  member = waiter (owner hex), score = arrival (server µs): the line, in order
-- beats  zset  member = waiter, score = server ms at which it is presumed dead
--
-- Waiters heartbeat (each attempt renews its beat), so a dead waiter leaves the line within
-- its beat; a live one re-beats every beat/3 and is never dropped while it does.

-- A key of a foreign type planted here would fail every call with WRONGTYPE: remove it.
local function zsetOnly(key)
  local kind = redis.call('TYPE', key)['ok']
  if kind ~= 'zset' and kind ~= 'none' then redis.call('DEL', key) end
end

-- Drops the waiters whose beat ran out, and beats that no waiter sets (planted past
-- nowMs + 2^32 ms, twice the longest beat: slack for a server clock stepped back), which
-- would never run out.
local function pruneWaiters(queue, beats, nowMs)
  for _, range in ipairs({{'-inf', nowMs}, {'(' .. (nowMs + 4294967296), '+inf'}}) do
    local dead = redis.call('ZRANGEBYSCORE', beats, range[1], range[2])
    -- In slices: unpack of thousands of values (a process with that many waiters killed)
    -- overflows Lua's stack, and would fail every script on the key while they stay.
    for i = 1, #dead, 1000 do
      redis.call('ZREM', queue, unpack(dead, i, math.min(i + 999, #dead)))
    end
    if #dead > 0 then redis.call('ZREMRANGEBYSCORE', beats, range[1], range[2]) end
  end
  -- A head with no beat (the beats key evicted or replaced while the line survived) could
  -- never be found dead, and would block the line for as long as others keep it alive.
  for _ = 1, 1000 do
    local head = redis.call('ZRANGE', queue, 0, 0)[1]
    if not head or redis.call('ZSCORE', beats, head) then break end
    redis.call('ZREM', queue, head)
  end
end

-- The first waiter in line, or nil.
local function headOf(queue)
  return redis.call('ZRANGE', queue, 0, 0)[1]
end

-- Joins the line at its end (keeps its place when already in it) and renews its beat.
local function enqueue(queue, beats, owner, nowUs, nowMs, beatMs)
  redis.call('ZADD', queue, 'NX', nowUs, owner)
  redis.call('ZADD', beats, nowMs + beatMs, owner)
  -- Only ever lengthened: a short-beat waiter must not expire the line of a long-beat one.
  local keep = beatMs * 2
  for _, key in ipairs({queue, beats}) do
    if redis.call('PTTL', key) < keep then redis.call('PEXPIRE', key, keep) end
  end
end

local function leave(queue, beats, owner)
  redis.call('ZREM', queue, owner)
  redis.call('ZREM', beats, owner)
end

-- Wakes one waiter alone, on its own channel `<prefix><owner>`.
local function wake(prefix, waiter, publish)
  redis.call(publish == 'SPUBLISH' and 'SPUBLISH' or 'PUBLISH', prefix .. waiter, 'r')
end
