-- getOrLockEntry: get-or-lock.lua's decision for one entry, as a function, so that one script
-- call can decide many entries of one slot (get-or-lock-many.lua). Its arguments and its reply
-- are get-or-lock.lua's KEYS, ARGV and reply (see the header there); the script that includes
-- it includes ../../../redis/scripts/fields.lua first. The server clock is read per entry.

local function getOrLockEntry(entry, lock, fresh, owner, lease, mode, retention, refreshBelow)
  local now, nowMicros = serverClock()
  -- Slack between TIME and the clock Redis expires keys by (frozen while a script runs).
  local CLOCK_SLACK_MS = 1000
  -- The longest ttl or load time stored (MAX_LIFETIME_MS in src/duration.ts: 365 days).
  local MAX_LIFETIME_MS = 31536000000
  -- How far a fresh copy's PTTL may be from x - now and still be the copy written for x: TIME
  -- and the expiry clock are both read in ms here, each rounded down.
  local FRESH_COPY_SLACK_MS = 2

  local corrupt = 0
  local f, plantedEntry = hashFieldsOrDelete(entry, 'd', 'x', 's', 'e', 'l', 'b', 'p', 'n', 'm', 't', 'f', 'c')
  if plantedEntry then corrupt = 1 end

  -- Every script that writes the hash leaves it with an expiry, and every deadline in it ends
  -- by then: commit.lua expires it at e, release.lua keeps it past p and n. So no deadline is
  -- trusted past the hash's own expiry, and a hash without one was planted: none at all.
  -- (-2 when there is no hash, or when a planted one was deleted above.)
  local pttl = redis.call('PTTL', entry)
  local horizon = -1
  if pttl >= 0 then horizon = now + pttl + CLOCK_SLACK_MS end
  if pttl == -1 then
    corrupt = 1
    redis.call('PEXPIRE', entry, retention)
  end

  -- The counter c and the fence f: garbage in either must not lower the tokens handed out.
  local counter, fence = tokenField(f[12], nowMicros), tokenField(f[11], nowMicros)
  local keepValue = true
  if f[11] and not fence then
    -- A fence we cannot read: as if the key was invalidated now. Every token issued before
    -- is refused, and the value, whose version it was, is dropped.
    fence = math.max(counter or 0, nowMicros)
    redis.call('HSET', entry, 'f', integer(fence))
    corrupt, keepValue = 1, false
  end
  if f[12] and not counter then
    counter = math.max(fence or 0, nowMicros)
    redis.call('HSET', entry, 'c', integer(counter))
    corrupt = 1
  end

  local data = f[1]
  local x, s, e = counted(f[2], horizon), counted(f[3], horizon), counted(f[4], horizon)
  local loadMs, ttlMs = counted(f[5] or '0', MAX_LIFETIME_MS), counted(f[10] or '0', MAX_LIFETIME_MS)
  local version = f[11] or ''
  -- A value is never fresher than its own ttl (commit.lua writes x = now + t): one that is
  -- would be served, and its fresh copy restored, for as long as the hash was made to live.
  if data and not (keepValue and x and s and e and loadMs and ttlMs and x <= s and s <= e and x - now <= ttlMs + CLOCK_SLACK_MS) then
    redis.call('HDEL', entry, 'd', 'x', 's', 'e', 'l', 't')
    corrupt, data = 1, nil
  end
  loadMs, ttlMs = loadMs or 0, ttlMs or 0

  -- A marker read back: its deadline, or 0 (and it is removed) when absent or out of range.
  local function marker(at, name, latest)
    local until_ = counted(f[at], latest)
    if f[at] and not until_ then
      redis.call('HDEL', entry, name)
      corrupt = 1
    end
    return until_ or 0
  end
  -- A backoff applies only while the value lives, so it needs no bound of its own.
  local backoffUntil = marker(6, 'b', math.huge)
  local passUntil = marker(7, 'p', horizon)
  local negativeUntil = marker(8, 'n', horizon)
  local negativeMessage = f[9]
  if negativeUntil > 0 and not (negativeMessage and string.sub(negativeMessage, 1, 2) == 'e|') then
    redis.call('HDEL', entry, 'n', 'm')
    corrupt, negativeUntil = 1, 0
  end

  local state = 'miss'
  if data then
    if now < x then state = 'fresh' elseif now < s then state = 'grace' elseif now < e then state = 'fallback' end
  end
  if state == 'miss' then data, x, s, e, version = '', now, now, now, '' end

  if state == 'fresh' then
    -- The copy commit.lua (or this script) wrote expires at x: one that does is kept. A caller
    -- whose L1 copy passed its ttl comes here without reading the copy, and finds the value
    -- another process reloaded, whose copy is there already: rewriting it was a SET of the
    -- whole value on every such call. A copy missing, without an expiry or expiring at another
    -- time (planted) is written again. (Every script that changes x or the value rewrites or
    -- deletes the copy, so one expiring at x is this value's, unless planted with that very
    -- expiry: its readers then come here until x, and are answered from the hash.)
    local copyTtl = redis.call('PTTL', fresh)
    if copyTtl < 0 or math.abs(copyTtl - (x - now)) > FRESH_COPY_SLACK_MS then
      local record = integer(x) .. '|' .. integer(s) .. '|' .. integer(e) .. '|' .. integer(loadMs) .. '|' .. integer(ttlMs) .. '|' .. version .. '|' .. data
      redis.call('SET', fresh, record, 'PX', integer(x - now))
    end
  else
    redis.call('DEL', fresh)
  end

  -- lockArg is a number, or a token already written out by integer().
  local function reply(lockState, lockArg)
    if type(lockArg) == 'number' then lockArg = integer(lockArg) end
    return {state, lockState, lockArg, data, x - now, s - now, e - now, loadMs, corrupt, ttlMs, integer(now), version, fence and integer(fence) or ''}
  end

  -- The token rule (nextTokenAfter in fields.lua), and the counter that remembers it; the token
  -- as integer() writes it. The hash's expiry read above still holds unless a repair (corrupt)
  -- deleted fields, which deletes the hash with its last field: then it is read again.
  local function nextToken()
    counter = nextTokenAfter(nowMicros, counter, fence)
    local token = integer(counter)
    redis.call('HSET', entry, 'c', token)
    if state == 'miss' and (pttl < retention or (corrupt == 1 and redis.call('PTTL', entry) < retention)) then
      redis.call('PEXPIRE', entry, retention)
    end
    return token
  end

  if mode == 'read' then
    if state == 'fresh' then return reply('none', 0) end
    if now < passUntil then return reply('pass', passUntil - now) end
    if state == 'miss' and now < negativeUntil then
      data = negativeMessage
      return reply('error', negativeUntil - now)
    end
  end
  if mode == 'refresh' and state == 'fresh' and refreshBelow >= 0 and x - now > refreshBelow then
    return reply('none', 0)
  end
  if mode ~= 'token' and state ~= 'miss' and now < backoffUntil then
    return reply('backoff', backoffUntil - now)
  end
  if mode == 'token' then return reply('token', nextToken()) end

  local held, foreignLock = lockValueAt(lock)
  if foreignLock then corrupt = 1 end
  -- Our own lock: an earlier attempt of this same lookup took it, and its reply was lost
  -- (the master failed over after replicating it). Waiting for it would wait out our own lease.
  local mine = owner .. ':'
  if held and string.sub(held, 1, #mine) == mine then
    local token = counted(string.sub(held, #mine + 1), math.huge)
    if token then return reply('won', token) end
  end

  if held then
    local lockTtl, repaired = heldFor(lock, lease)
    if repaired then corrupt = 1 end
    return reply('held', lockTtl)
  end
  local token = nextToken()
  redis.call('SET', lock, owner .. ':' .. token, 'PX', lease)
  return reply('won', token)
end
