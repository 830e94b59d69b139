-- clear: the next generation of a namespace (or of every namespace), published with the
-- write. A generation is part of every key name in its namespace, so raising it leaves the
-- old entries unreachable (they expire by their own lifetimes): one command, whatever the
-- namespace holds.
--
-- KEYS[1]  generation  <ns>:__generation:<name> (a string, no expiry)
-- ARGV[1]  channel     the generation channel (with the client's key prefix), '' for none
-- ARGV[2]  message     '<cache id>|<name>|': the new generation is appended. Published here,
--                      with the write, so a clear never succeeds untold.
--
-- The new generation is the old one + 1, or the server clock in ms when that is higher: a
-- generation key lost (evicted, or with a master whose last write never reached its replica)
-- still rises above every generation handed out before, so an old generation's entries can
-- never become reachable again. Returns it as a decimal string.

--# include ../../../redis/scripts/fields.lua

local key = KEYS[1]
local nowMs = serverClock()
typeOrDelete(key, 'string')
local current = counted(stringAt(key) or '0', nowMs + 3600000) or 0
local generation = integer(math.max(current + 1, nowMs))
redis.call('SET', key, generation)
if ARGV[1] ~= '' then redis.call('PUBLISH', ARGV[1], ARGV[2] .. generation) end
return generation
