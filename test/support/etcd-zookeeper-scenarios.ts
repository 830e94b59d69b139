/**
 * Scenarios the etcd and ZooKeeper lock tests share: the same claim, checked the same way,
 * on each backend. `queueLength(key)` counts the lock's entries in the store (keys under
 * the etcd prefix, children of the ZooKeeper path), so a test knows a waiter has queued.
 */
import type { Redis } from 'ioredis'
import { expect } from 'vitest'
import { LockBusyError } from '../../src/errors.js'
import type { Locks } from '../../src/lock/index.js'
import { until } from './timing.js'
import type { Worker } from './workers.js'

export type QueueLength = (key: string) => Promise<number>

/** Free → taken; held → busy (at once and after a short wait); released → the waiter, with a greater token. */
export async function expectBusyThenHandOff(
  locks: Locks<unknown>,
  key: string,
  queueLength: QueueLength,
): Promise<void> {
  const first = await locks.acquire(key)
  await expect(locks.tryAcquire(key)).resolves.toBeUndefined()
  await expect(locks.acquire(key, { wait: 200 })).rejects.toBeInstanceOf(LockBusyError)
  const second = locks.acquire(key, { wait: '10s' })
  await until(async () => (await queueLength(key)) === 2, 'the waiter to queue')
  await first.release()
  const next = await second
  expect(next.token).toBeGreaterThan(first.token)
  await next.release()
}

/**
 * `count` waiters, each with a `Locks` of its own (as separate processes would be: one
 * `Locks` queues its own waiters for a key locally, one at a time), queued one after
 * another, acquire in that order; returns their tokens in acquisition order.
 */
export async function queueInOrder(
  locks: Locks<unknown>,
  newLocks: () => Promise<Locks<unknown>>,
  key: string,
  count: number,
  queueLength: QueueLength,
  onQueued: () => Promise<void> = async () => {},
): Promise<bigint[]> {
  const holder = await locks.acquire(key)
  const order: number[] = []
  const tokens: bigint[] = []
  const waits: Promise<void>[] = []
  const waiters = await Promise.all(Array.from({ length: count }, newLocks))
  try {
    for (const [i, waiter] of waiters.entries()) {
      waits.push(
        waiter.acquire(key, { wait: '60s' }).then(async (held) => {
          order.push(i)
          tokens.push(held.token)
          await held.release()
        }),
      )
      await until(async () => (await queueLength(key)) === i + 2, `waiter ${i} to queue`)
    }
    await onQueued()
    await holder.release()
    await Promise.all(waits)
  } finally {
    await Promise.allSettled(waits)
    await Promise.all(waiters.map((waiter) => waiter.close()))
  }
  expect(order).toEqual(Array.from({ length: count }, (_, i) => i))
  expect([...tokens].sort((a, b) => (a < b ? -1 : 1))).toEqual(tokens)
  return tokens
}

/** The holder process is SIGKILLed; resolves how long the waiter process took to get the lock after that. */
export async function handOffAfterCrash(
  holder: Worker,
  waiter: Worker,
  key: string,
  queueLength: QueueLength,
): Promise<number> {
  const first = await holder.request<{ token: string }>({ op: 'hold', key, lease: 1_000, wait: 0 })
  const next = waiter.request<{ token: string }>({ op: 'hold', key, lease: 1_000, wait: 20_000 }, 30_000)
  // A worker's first call also opens its connection: generous on a loaded 2-core box.
  await until(async () => (await queueLength(key)) === 2, 'the waiter to queue', 30_000)
  const killedAt = performance.now()
  holder.kill('SIGKILL')
  const second = await next
  const handOffMs = performance.now() - killedAt
  expect(BigInt(second.token)).toBeGreaterThan(BigInt(first.token))
  return handOffMs
}

/**
 * The holder process is SIGSTOPped until the waiter process holds the lock, then resumed.
 * The waiter writes `dataKey` through its owner-checked `resource`; then the paused one's
 * signal must have aborted (once `resumed()` says it knows), and its late write must be refused.
 */
export async function pausedHolderIsFenced(
  paused: Worker,
  next: Worker,
  key: string,
  dataKey: string,
  queueLength: QueueLength,
  resumed: () => Promise<void> = async () => {},
): Promise<void> {
  const first = await paused.request<{ token: string }>({ op: 'hold', key, lease: 1_000, wait: 0 })
  const second = next.request<{ token: string }>({ op: 'hold', key, lease: 1_000, wait: 20_000 }, 30_000)
  await until(async () => (await queueLength(key)) === 2, 'the second process to queue', 30_000)
  paused.kill('SIGSTOP')
  try {
    const taken = await second
    expect(BigInt(taken.token)).toBeGreaterThan(BigInt(first.token))
    await expect(next.request({ op: 'fencedWrite', key: dataKey, value: 'next holder' })).resolves.toBe(true)
  } finally {
    paused.kill('SIGCONT')
  }
  const status = await paused.request<{ aborted: boolean; reason?: string }>({ op: 'status' })
  expect(status).toMatchObject({ aborted: true, reason: 'LockLostError' })
  await resumed()
  await expect(paused.request({ op: 'fencedWrite', key: dataKey, value: 'late' })).resolves.toBe(false)
}

type Contention = { tokens: string[]; errors: Record<string, number>; overlaps: number }

/**
 * The worker processes contend for one key (the worker's `contend`: an INCR/DECR
 * occupancy check in Redis inside each critical section, `rounds` counting them); once
 * under way, `killLeader()` kills the store's leader. No two holders ever, tokens never
 * repeated, and the lock keeps working after the kill. Failed attempts must be typed.
 */
export async function contendThroughLeaderLoss(
  label: string,
  workers: Worker[],
  redis: Redis,
  killLeader: () => Promise<string>,
): Promise<void> {
  await redis.set('rounds', 0)
  const runs = workers.map((w) =>
    w.request<Contention>({ op: 'contend', key: 'cluster-key', rounds: 40, lease: 1_000, wait: 10_000 }, 120_000),
  )
  await until(async () => Number(await redis.get('rounds')) >= 15, 'contention to be under way', 30_000)
  const killed = await killLeader()
  const roundsAtKill = Number(await redis.get('rounds'))
  const results = await Promise.all(runs)
  const tokens = results.flatMap((r) => r.tokens.map(BigInt))
  const errors = results.map((r) => r.errors)
  console.log(
    `[${label}] killed leader ${killed} after ${roundsAtKill} rounds; ${tokens.length} sections held; failed attempts: ${JSON.stringify(errors)}`,
  )
  expect(results.reduce((sum, r) => sum + r.overlaps, 0)).toBe(0)
  expect(new Set(tokens).size).toBe(tokens.length)
  // It kept working after the kill: more sections than before it.
  expect(Number(await redis.get('rounds'))).toBeGreaterThan(roundsAtKill + 20)
  // Whatever failed, failed typed (busy during the election, or the backend's own error).
  for (const byCode of errors)
    for (const code of Object.keys(byCode))
      expect(['ERR_SG_LOCK_BUSY', 'ERR_SG_LOCK_BACKEND', 'ERR_SG_LOCK_LOST']).toContain(code)
}
