/**
 * The fenced resource of the election tests: one Redis hash that every leader writes to
 * with its term, and that refuses a term older than the newest it has seen. Each write
 * carries `checkedAt` (Date.now() of the `leading` check right before it; one host, one
 * clock): a refused write whose check came after the newer term's first write is an
 * overlap (two processes believed they led at once); one checked earlier is a write that
 * was in flight when its leader stepped down (fenced, as fencing is for).
 */
import type { Redis } from 'ioredis'

export const FENCE_KEY = 'election-fence'

export const FENCE_LUA = `
-- KEYS[1] fence hash; ARGV[1] term, ARGV[2] candidate id, ARGV[3] checkedAt (ms)
local term, id, checkedAt = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3])
local current = tonumber(redis.call('HGET', KEYS[1], 'term') or '-1')
if term < current then
  if checkedAt > tonumber(redis.call('HGET', KEYS[1], 'since')) then
    redis.call('HINCRBY', KEYS[1], 'overlaps', 1)
  else
    redis.call('HINCRBY', KEYS[1], 'fenced', 1)
  end
  return 0
end
if term == current then
  if redis.call('HGET', KEYS[1], 'holder') ~= id then
    redis.call('HINCRBY', KEYS[1], 'overlaps', 1)
    return 0
  end
  redis.call('HINCRBY', KEYS[1], 'writes', 1)
  return 1
end
redis.call('HSET', KEYS[1], 'term', ARGV[1], 'holder', id, 'since', ARGV[3])
redis.call('HINCRBY', KEYS[1], 'terms', 1)
redis.call('HINCRBY', KEYS[1], 'writes', 1)
redis.call('RPUSH', KEYS[1] .. ':log', ARGV[1] .. ' ' .. id)
return 1`

export interface FenceState {
  terms: number
  writes: number
  fenced: number
  overlaps: number
  /** Highest term that wrote, as a decimal string. */
  term: string
  holder: string
  /** `term id` per term, in the order the terms began. */
  log: string[]
}

export async function readFence(redis: Redis): Promise<FenceState> {
  const [hash, log] = await Promise.all([redis.hgetall(FENCE_KEY), redis.lrange(`${FENCE_KEY}:log`, 0, -1)])
  return {
    terms: Number(hash.terms ?? 0),
    writes: Number(hash.writes ?? 0),
    fenced: Number(hash.fenced ?? 0),
    overlaps: Number(hash.overlaps ?? 0),
    term: hash.term ?? '',
    holder: hash.holder ?? '',
    log,
  }
}

export async function resetFence(redis: Redis): Promise<void> {
  await redis.del(FENCE_KEY, `${FENCE_KEY}:log`)
}
