-- finish-claim: end a run-once claim, but keep it until at least atLeast ms after it was
-- taken (lockAtLeastFor), by the server's clock. Only our own claim is touched: one that
-- outlived lockAtMostFor and was taken by another instance is left alone.
--
-- KEYS[1]  claim    <ns>:{o:<name>}   string "<owner>|<claimed at, server ms>"
-- ARGV[1]  owner    the owner given to claim.lua
-- ARGV[2]  atLeast  ms after the claim time that the claim must still stand
--
-- Returns 0 when the claim was not ours (any more), 1 when it is kept a while longer,
-- 2 when it was deleted.

--# include ../../../redis/scripts/fields.lua

local claim, owner, atLeast = KEYS[1], ARGV[1], tonumber(ARGV[2])
local value = stringAt(claim)
if not value then return 0 end
local sep = string.find(value, '|', 1, true)
if not sep or string.sub(value, 1, sep - 1) ~= owner then return 0 end
local now = serverClock()
-- A claim time we cannot read counts as now: lockAtLeastFor from here, within the claim's expiry.
local claimedAt = counted(string.sub(value, sep + 1), math.huge) or now
local remaining = claimedAt + atLeast - now
if remaining > 0 then
  -- never past lockAtMostFor: only shorten the expiry already set
  local pttl = redis.call('PTTL', claim)
  if pttl < 0 or remaining < pttl then redis.call('PEXPIRE', claim, remaining) end
  return 1
end
redis.call('DEL', claim)
return 2
