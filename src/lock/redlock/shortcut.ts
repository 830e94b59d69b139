import { parseTimerDuration, type Duration } from '../../duration.js'
import { InvalidArgumentError } from '../../errors.js'
import type { Redis } from 'ioredis'
import { isRedisClient } from '../redis/shortcut.js'
import type { BackendShortcut } from '../resolve-backend.js'
import { RedlockBackend } from './backend.js'

export interface RedlockOptions {
  /** Independent Redis masters (not replicas of each other; not a Cluster). 5 survive 2 failures. */
  nodes: readonly Redis[]
  /**
   * Bound on each call to one node, in ms or `'100ms'`: a dead or hung node costs this
   * much per attempt. Keep it well below the lease. A node that has not connected yet gets
   * `commandTimeout` instead, so a process starting up does not count it dead. Default `'100ms'`.
   */
  nodeTimeout?: Duration
}

/** `createLocks({ redlock: [r1, …, r5] })` or `createLocks({ redlock: { nodes, nodeTimeout } })`. */
export const redlockShortcut: BackendShortcut = {
  option: 'redlock',
  create(value, settings) {
    const options: RedlockOptions = Array.isArray(value) ? { nodes: value } : (value as RedlockOptions)
    const nodes = options?.nodes
    if (!Array.isArray(nodes) || nodes.length === 0 || !nodes.every(isRedisClient)) {
      throw new InvalidArgumentError('redlock', 'expected a non-empty array of ioredis clients, one per independent Redis master')
    }
    if (new Set(nodes).size !== nodes.length) throw new InvalidArgumentError('redlock', 'the same client is listed twice; each node must be a separate master')
    const nodeTimeoutMs = parseTimerDuration('redlock.nodeTimeout', options.nodeTimeout ?? 100)
    return new RedlockBackend(nodes, settings.namespace, nodeTimeoutMs, settings.commandTimeoutMs)
  },
}
