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
import { retryThroughFailover } from '../redis/failover-retry.js'
import { execWithReplicaWait, type ReplicaWait } from '../../redis/replicas.js'
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
  /** Cluster or Sentinel: an attempt retries a failover's errors within the wait (as one lock's acquire). */
  readonly failsOver: boolean
  /** `waitForReplicas`: each attempt is followed by WAIT in the same round trip, as one lock's acquire. */
  readonly replicaWait: ReplicaWait | undefined
  /** Gives one key's lock back for `owner`, waking its waiters (compare-and-delete, release.lua). */
  giveBack(keys: LockKeys, owner: string): Promise<unknown>
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
 * until a release message or the busy key's PTTL. As one lock's acquire: each attempt rides a
 * failover within the wait, and with `waitForReplicas` locks the replicas did not acknowledge
 * are given back. An attempt that got no answer is undone behind itself for every key
 * (release-owner.lua, same connection).
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
  const newOwner = () => randomBytes(16).toString('hex')
  let owner = newOwner()
  const retry = {
    failsOver: parts.failsOver,
    deadline: performance.now() + request.waitMs,
    signal: request.signal,
    // The failed attempt may still run, and its release is queued behind it for its owner: take a new one.
    onRetry: () => (owner = newOwner()),
  }
  const held = await acquireWaiting(
    request,
    async () => {
      let sentAt = performance.now()
      // Through a failover, within the caller's wait: else every call during one fails.
      const answer = await retryThroughFailover(
        () => ((sentAt = performance.now()), attempt(parts, scripts, keys, owner, request.leaseMs, keep)),
        retry,
      )
      if (!answer) return { busyForMs: 0 } // aborted: acquireWaiting sees it and gives up
      const { reply, acknowledged } = answer
      if (Number(reply[0]) !== 1) {
        busy = request.keys[Number(reply[1]) - 1] ?? busy
        return { busyForMs: Number(reply[2]) }
      }
      const wait = parts.replicaWait
      if (wait && acknowledged! < wait.replicas) {
        // Strict, as one lock: locks a failover could lose are no locks. Give them all back
        // (waking whoever saw them busy) and count this attempt as busy.
        await Promise.all(keys.map((k) => parts.giveBack(k, owner).catch(() => {})))
        return { busyForMs: wait.timeoutMs }
      }
      return { held: keys.map((k, i) => parts.held(k, owner, String(reply[i + 1]), sentAt)) }
    },
    async () => combined(await Promise.all(keys.map((k) => parts.notifier.subscribe(k.channel)))),
  )
  return held ?? { busy }
}

/**
 * One acquire-many.lua call, with `WAIT` in the same round trip when asked (then also the
 * replica count). If it fails without an answer, the script may still run later (replayed
 * after a reconnect): every key is released for that owner behind it, on the same connection.
 */
async function attempt(
  parts: RedisMultiParts,
  scripts: ClientWith<'stampedeGuardLockAcquireMany'>,
  keys: LockKeys[],
  owner: string,
  leaseMs: number,
  keep: number,
): Promise<{ reply: (string | number)[]; acknowledged?: number }> {
  const args = [keys.length * 2, ...keys.flatMap((k) => [k.lock, k.counter]), owner, leaseMs, keep] as const
  const wait = parts.replicaWait
  try {
    if (!wait)
      return {
        reply: (await boundedRedisCall(parts.client, parts.commandTimeoutMs, 'lock acquire-many', () =>
          scripts.stampedeGuardLockAcquireMany(...args),
        )) as (string | number)[],
      }
    // WAIT waits on the server on purpose: its timeout is added to the bound.
    const { replies, acknowledged } = await boundedRedisCall(
      parts.client,
      parts.commandTimeoutMs + wait.timeoutMs,
      'lock acquire-many',
      () =>
        execWithReplicaWait(
          parts.client,
          (pipeline) =>
            (pipeline as unknown as ClientWith<'stampedeGuardLockAcquireMany'>).stampedeGuardLockAcquireMany(...args),
          wait,
        ),
    )
    return { reply: replies[0] as (string | number)[], acknowledged }
  } catch (error) {
    for (const k of keys) releaseAbandoned(parts.client, k, owner)
    throw error
  }
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
