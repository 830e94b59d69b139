import { randomBytes } from 'node:crypto'
import type { Cluster, Redis } from 'ioredis'
import { releaseAbandoned } from '../../redis/abandoned.js'
import { keySlot } from '../../redis/failing-clock.js'
import { keyPrefixOf } from '../../redis/keys.js'
import { lockKeys, type LockKeys } from '../redis/keys.js'
import type { Notifier } from '../../redis/notifier.js'
import { registerScripts, type ClientWith } from '../../redis/scripts.js'
import type { HeldLock, MultiAcquireRequest } from '../backend.js'
import { boundedRedisCall } from '../redis/bounded-call.js'
import { acquireWaiting, type Wakeup } from '../waiting.js'

const SCRIPTS = { stampedeGuardLockAcquireMany: { file: 'acquire-many.lua', keys: null } } as const

/** How long a key's token counter outlives its last acquisition (as the mutex's). */
const COUNTER_KEEP_MS = 60_000

/** @internal What the Redis lock backend lends `withLocks`' one-step acquisition. */
export interface RedisMultiParts {
  readonly client: (Redis | Cluster) & ClientWith<'stampedeGuardLockRelease'>
  readonly namespace: string
  readonly commandTimeoutMs: number
  readonly notifier: Notifier
  /** The backend's held lock for one key (renewal batched, release publishing), as its own acquire makes it. */
  held(keys: LockKeys, owner: string, token: string, acquiredAt: number): HeldLock
}

/**
 * Runs of consecutive keys (in canonical order) whose locks share a slot: on a standalone or
 * Sentinel Redis every key, on a Cluster the neighbours whose tags hash alike.
 */
/** @internal */
export function slotRuns(client: Redis | Cluster, namespace: string, keys: readonly string[]): string[][] {
  if (client.isCluster !== true) return keys.length === 0 ? [] : [[...keys]]
  const prefix = keyPrefixOf(client)
  const runs: string[][] = []
  let slot: number | undefined
  for (const key of keys) {
    const own = keySlot(prefix + lockKeys(namespace, key).lock)
    if (own === slot) runs.at(-1)!.push(key)
    else runs.push([key])
    slot = own
  }
  return runs
}

/**
 * Takes every key of `request` in one acquire-many.lua call per attempt, all or none,
 * waiting as one lock does: subscribed to every key's channel before re-checking, sleeping
 * until a release message or the busy key's PTTL. An attempt that got no answer is undone
 * behind itself for every key (release-owner.lua, same connection).
 * @internal
 */
export async function acquireMany(
  parts: RedisMultiParts,
  request: MultiAcquireRequest,
): Promise<HeldLock[] | { busy: string }> {
  const scripts = registerScripts(parts.client, SCRIPTS, new URL('./', import.meta.url))
  const keys = request.keys.map((key) => lockKeys(parts.namespace, key))
  const keep = Math.max(COUNTER_KEEP_MS, 2 * request.leaseMs)
  let busy = request.keys[0]!
  const held = await acquireWaiting(
    request,
    async () => {
      const owner = randomBytes(16).toString('hex')
      const sentAt = performance.now()
      let reply: (string | number)[]
      try {
        reply = (await boundedRedisCall(parts.client, parts.commandTimeoutMs, 'lock acquire-many', () =>
          scripts.stampedeGuardLockAcquireMany(
            keys.length * 2,
            ...keys.flatMap((k) => [k.lock, k.counter]),
            owner,
            request.leaseMs,
            keep,
          ),
        )) as (string | number)[]
      } catch (error) {
        for (const k of keys) releaseAbandoned(parts.client, k, owner)
        throw error
      }
      if (Number(reply[0]) !== 1) {
        busy = request.keys[Number(reply[1]) - 1] ?? busy
        return { busyForMs: Number(reply[2]) }
      }
      return { held: keys.map((k, i) => parts.held(k, owner, String(reply[i + 1]), sentAt)) }
    },
    async () => combined(await Promise.all(keys.map((k) => parts.notifier.subscribe(k.channel)))),
  )
  return held ?? { busy }
}

/** One wakeup over every key's subscription: news on any of them wakes the wait. */
function combined(subscriptions: Required<Wakeup>[]): Wakeup {
  return {
    // Only one pending next() per subscription: once one answers, the others are woken and settled.
    next: async (timeoutMs) => {
      const pending = subscriptions.map((s) => s.next(timeoutMs))
      await Promise.race(pending)
      for (const s of subscriptions) s.interrupt()
      await Promise.all(pending)
    },
    interrupt: () => subscriptions.forEach((s) => s.interrupt()),
    release: () => subscriptions.forEach((s) => s.release()),
  }
}
