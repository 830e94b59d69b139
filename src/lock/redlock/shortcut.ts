import { parseDuration, type Duration } from '../../duration.js'
import { InvalidArgumentError } from '../../errors.js'
import type { Redis } from 'ioredis'
import type { RedisClientLike } from '../../redis-client.js'
import { isRedisClient } from '../redis/options.js'
import type { BackendShortcut } from '../backend.js'
import { RedlockBackend } from './backend.js'

export interface RedlockOptions {
  /** Independent Redis masters (not replicas of each other; not a Cluster). 5 survive 2 failures. */
  nodes: readonly RedisClientLike[]
  /**
   * Bound on each call to one node, in ms or `'500ms'`: a hung node costs this much per
   * attempt (a dead one fails at once). It is measured by this process's timers, so it
   * also absorbs this process's own event-loop stalls: too tight, and one stall makes
   * every node look dead. Keep it well below the lease; the validity check (lease −
   * elapsed − drift) keeps a slow attempt safe whatever its value. A node that has not
   * connected yet gets `commandTimeout` instead. Default `'500ms'`.
   */
  nodeTimeout?: Duration
}

/** `createLocks({ redlock: [r1, …, r5] })` or `createLocks({ redlock: { nodes, nodeTimeout } })`. */
export const redlockShortcut: BackendShortcut<readonly RedisClientLike[] | RedlockOptions> = {
  create(value, settings) {
    const options: RedlockOptions = Array.isArray(value) ? { nodes: value } : (value as RedlockOptions)
    const nodes = options?.nodes
    if (!Array.isArray(nodes) || nodes.length === 0 || !nodes.every(isRedisClient)) {
      throw new InvalidArgumentError(
        'redlock',
        'expected a non-empty array of ioredis clients, one per independent Redis master',
      )
    }
    if (new Set(nodes).size !== nodes.length)
      throw new InvalidArgumentError('redlock', 'the same client is listed twice; each node must be a separate master')
    const nodeTimeoutMs = parseDuration('redlock.nodeTimeout', options.nodeTimeout ?? 500)
    return new RedlockBackend(nodes as readonly Redis[], settings.namespace, nodeTimeoutMs, settings.commandTimeoutMs)
  },
}
