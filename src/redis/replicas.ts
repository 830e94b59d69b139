import type { ChainableCommander, Cluster, Redis } from 'ioredis'
import { parseDuration, type Duration } from '../duration.js'
import { InvalidArgumentError } from '../errors.js'

/** How many replicas must have a write before it counts as durable, and how long to wait for them. */
export interface ReplicaWait {
  replicas: number
  timeoutMs: number
}

/** What `waitForReplicas` accepts, for the cache's lock and for `withLock` on Redis. */
export type ReplicaWaitOption = false | { replicas?: number; timeout?: Duration }

const REPLICA_WAIT_KEYS = new Set(['replicas', 'timeout'])

/** `where`: the option's name in errors (`lock.waitForReplicas`, `redis.waitForReplicas`). `replicas` defaults to 1, `timeout` to 50 ms. */
export function parseReplicaWait(where: string, option: ReplicaWaitOption | undefined): ReplicaWait | undefined {
  if (option === undefined || option === false) return undefined
  if (typeof option !== 'object' || option === null)
    throw new InvalidArgumentError(where, 'must be false or an object { replicas, timeout }')
  for (const name of Object.keys(option)) {
    if (!REPLICA_WAIT_KEYS.has(name)) throw new InvalidArgumentError(`${where}.${name}`, 'unknown option')
  }
  const replicas = option.replicas ?? 1
  if (typeof replicas !== 'number' || !Number.isInteger(replicas) || replicas < 1) {
    throw new InvalidArgumentError(`${where}.replicas`, `must be a positive integer, got ${String(replicas)}`)
  }
  return { replicas, timeoutMs: parseDuration(`${where}.timeout`, option.timeout ?? 50) }
}

/**
 * One round trip: `queue` adds its commands to a pipeline, then `WAIT replicas timeoutMs`,
 * which answers once that many replicas acknowledged every write this connection sent so
 * far, or at the timeout. Resolves with the commands' replies (rejects with the first error)
 * and the number of replicas that acknowledged. Redis replication stays asynchronous: a
 * failover can still lose a write that `WAIT` saw acknowledged by fewer replicas than asked.
 *
 * This is the hook for any lock on Redis: the cache's lock uses it, and a `withLock` backend
 * can too (treating `acknowledged < wait.replicas` as not acquired: release and retry).
 * @internal
 */
export async function execWithReplicaWait(
  client: Redis | Cluster,
  queue: (pipeline: ChainableCommander) => void,
  wait: ReplicaWait,
): Promise<{ replies: unknown[]; acknowledged: number }> {
  const pipeline = client.pipeline()
  queue(pipeline)
  pipeline.call('WAIT', wait.replicas, wait.timeoutMs)
  const results = (await pipeline.exec()) ?? []
  const replies: unknown[] = []
  for (const [error, reply] of results) {
    if (error) throw error
    replies.push(reply)
  }
  const acknowledged = Number(replies.pop() ?? 0)
  return { replies, acknowledged }
}
