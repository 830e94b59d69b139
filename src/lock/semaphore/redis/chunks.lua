-- chunks: one command over a long argument list, a bounded slice at a time (unpack of
-- thousands of values overflows Lua's stack). Included; defines functions only.

-- redis.call(command, key, [option,] list[i..j]) for slices of `step` values; returns the sum of the replies.
local function inChunks(command, key, option, list, step)
  local total = 0
  for i = 1, #list, step do
    local j = math.min(i + step - 1, #list)
    local reply
    if option then
      reply = redis.call(command, key, option, unpack(list, i, j))
    else
      reply = redis.call(command, key, unpack(list, i, j))
    end
    total = total + (tonumber(reply) or 0)
  end
  return total
end
