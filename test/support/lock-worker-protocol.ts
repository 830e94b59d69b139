/** What test/support/lock-worker.ts answers, and the fenced Redis write the tests share with it. */

export type LockWorkerRequest =
  | { op: 'acquire'; key: string; lease: number; wait: number }
  | { op: 'state'; key: string }
  | { op: 'release'; key: string }
  | { op: 'contend'; key: string; iterations: number; lease: number; tolerateErrors?: boolean; stopKey?: string }
  | { op: 'fenced-write'; key: string; schema: string; value: string }

/** A Redis key written only by a newer token: the fence lives next to the value. */
export const FENCED_SET_LUA = `
-- KEYS[1] value key, KEYS[2] its fence; ARGV[1] value, ARGV[2] token
local fence = tonumber(redis.call('GET', KEYS[2]) or '0')
if tonumber(ARGV[2]) <= fence then return 0 end
redis.call('SET', KEYS[2], ARGV[2])
redis.call('SET', KEYS[1], ARGV[1])
return 1`
