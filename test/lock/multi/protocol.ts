/** What the multi-key worker (./worker.ts) is told and answers, and the counted resource both sides share. */

/** The store a worker reaches, built by each backend's test file. */
export type MultiWorkerStore =
  | { backend: 'postgres'; database: string }
  | { backend: 'mysql'; database: string }
  | { backend: 'etcd'; hosts: string[] }
  | { backend: 'zookeeper'; connect: string; sessionMs: number }

export interface MultiWorkerConfig {
  store: MultiWorkerStore
  namespace: string
  /** The redis-server holding the counted resource. */
  resourcePort: number
}

export type MultiWorkerRequest =
  | { op: 'contend'; keys: string[]; rounds: number; holdMs: number; wait: number; stats: string }
  | { op: 'hold'; key: string }
  | { op: 'release'; key: string }

export interface ContendReply {
  rounds: number
  /** Errors by name: a deadlock would show as LockBusyError (the wait ran out) or a database deadlock error. */
  errors: Record<string, number>
}

/**
 * Entering one key's section of the counted resource, atomically: `inside` must go 0 → 1
 * (more is an overlap: two holders of one key at once), and the key's token must be
 * greater than every token that entered before (an equal or older one is fenced: a token
 * reused or going backwards).
 */
export const ENTER_LUA = `
-- KEYS[1] inside counter of the key, KEYS[2] last token of the key, KEYS[3] stats hash; ARGV[1] token
if redis.call('INCR', KEYS[1]) ~= 1 then redis.call('HINCRBY', KEYS[3], 'overlaps', 1) end
local last = tonumber(redis.call('GET', KEYS[2]) or '-1')
if tonumber(ARGV[1]) <= last then
  redis.call('HINCRBY', KEYS[3], 'fenced', 1)
else
  redis.call('SET', KEYS[2], ARGV[1])
end
redis.call('HINCRBY', KEYS[3], 'entries', 1)
return 1`
