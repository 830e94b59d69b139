-- extend-claim: keep a run-once claim that is still ours for `atMost` ms from now (the
-- runOnce keepAlive renewal). A claim that ran out, or was taken by another instance, is
-- left alone: an extension never takes a claim back.
--
-- KEYS[1]  claim   <ns>:{o:<name>}   string "<owner>|<claimed at, server ms>"
-- ARGV[1]  owner   the owner given to claim.lua
-- ARGV[2]  atMost  ms from now (lockAtMostFor)
--
-- Returns 1 when extended, 0 when the claim is not ours (any more).

--# include ../../../redis/scripts/fields.lua

local claim, owner, atMost = KEYS[1], ARGV[1], tonumber(ARGV[2])
if not atMost or atMost < 1 then return redis.error_reply('ERR stampede-guard extend-claim: atMost >= 1 ms expected') end
local value = stringAt(claim)
if not value then return 0 end
local sep = string.find(value, '|', 1, true)
if not sep or string.sub(value, 1, sep - 1) ~= owner then return 0 end
redis.call('PEXPIRE', claim, atMost)
return 1
