/** What test/lock/semaphore/worker.ts answers, and the protected resource's counting scripts. */

export interface SemaphoreWorkerConfig {
  /** The semaphore's redis-server (or a proxy in front of it). */
  port: number
  /** The protected resource's own redis-server: it counts who is inside. */
  resourcePort?: number
  namespace?: string
  /** ioredis' `autoResendUnfulfilledCommands` (default true). */
  resend?: boolean
  /** Use the PostgreSQL backend on this database instead of Redis (`port` is then unused). */
  postgresDatabase?: string
  /** Its port (default: the machine's PostgreSQL; a proxy in front of it). */
  postgresPort?: number
  /** Use the etcd backend on these client URLs instead. */
  etcdHosts?: string[]
  /** Use the ZooKeeper backend on this connection string instead, with this session timeout (ms). */
  zookeeper?: { connect: string; sessionMs: number }
}

export type SemaphoreWorkerRequest =
  | { op: 'acquire'; id: string; name: string; permits: number; count: number; lease: number; wait: number }
  | { op: 'release'; id: string }
  | { op: 'state'; id: string }
  | {
      op: 'contend'
      name: string
      permits: number
      holders: number
      iterations: number
      lease: number
      count?: number
      holdMs?: number
      /** Stop once this key exists on the resource server. */
      stopKey?: string
    }
  | { op: 'race-release'; name: string; rounds: number; lease: number }

export interface AcquireReply {
  tokens: string[]
  /** `Date.now()` here (offset included) when it got them. */
  at: number
}

export type ReleaseReply = { released: true } | { released: false; error: string; message: string }

export interface ContendReply {
  entries: number
  errors: string[]
}

/**
 * The resource counts its users itself: `enter` adds the permits taken (ARGV[1]) to `inside` and keeps the highest
 * value ever seen in `max`; `leave` decrements. More than N inside at once shows as max > N.
 */
export const ENTER_LUA = `
local inside = redis.call('INCRBY', KEYS[1], ARGV[1])
if inside > tonumber(redis.call('GET', KEYS[2]) or '0') then redis.call('SET', KEYS[2], inside) end
redis.call('INCR', KEYS[3])
return inside`
export const LEAVE_LUA = `return redis.call('DECRBY', KEYS[1], ARGV[1])`
