import type { ChainableCommander, Cluster, Redis } from 'ioredis'

/** How many replicas must have a write before it counts as durable, and how long to wait for them. */
export interface ReplicaWait {
  replicas: number
  timeoutMs: number
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
