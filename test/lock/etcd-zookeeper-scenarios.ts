/**
 * Scenarios the etcd and ZooKeeper lock tests share: the same claim, checked the same way,
 * on each backend. `queueLength(key)` counts the lock's entries in the store (keys under
 * the etcd prefix, children of the ZooKeeper path), so a test knows a waiter has queued.
 */
import { expect } from 'vitest'
import { LockBusyError } from '../../src/errors.js'
import type { Locks } from '../../src/lock/index.js'
import { until } from '../support/timing.js'
import type { Worker } from '../support/workers.js'

export type QueueLength = (key: string) => Promise<number>

/** Free → taken; held → busy (at once and after a short wait); released → the waiter, with a greater token. */
export async function expectBusyThenHandOff(locks: Locks<unknown>, key: string, queueLength: QueueLength): Promise<void> {
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

/** `count` waiters queued one after another acquire in that order; returns their tokens in acquisition order. */
export async function queueInOrder(locks: Locks<unknown>, key: string, count: number, queueLength: QueueLength, onQueued: () => Promise<void> = async () => {}): Promise<bigint[]> {
  const holder = await locks.acquire(key)
  const order: number[] = []
  const tokens: bigint[] = []
  const waits: Promise<void>[] = []
  for (let i = 0; i < count; i++) {
    waits.push(
      locks.acquire(key, { wait: '60s' }).then(async (held) => {
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
  expect(order).toEqual(Array.from({ length: count }, (_, i) => i))
  expect([...tokens].sort((a, b) => (a < b ? -1 : 1))).toEqual(tokens)
  return tokens
}

/** The holder process is SIGKILLed; resolves how long the waiter process took to get the lock after that. */
export async function handOffAfterCrash(holder: Worker, waiter: Worker, key: string, queueLength: QueueLength): Promise<number> {
  const first = await holder.request<{ token: string }>({ op: 'hold', key, lease: 1_000, wait: 0 })
  const next = waiter.request<{ token: string }>({ op: 'hold', key, lease: 1_000, wait: 20_000 }, 30_000)
  await until(async () => (await queueLength(key)) === 2, 'the waiter to queue')
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
export async function pausedHolderIsFenced(paused: Worker, next: Worker, key: string, dataKey: string, queueLength: QueueLength, resumed: () => Promise<void> = async () => {}): Promise<void> {
  const first = await paused.request<{ token: string }>({ op: 'hold', key, lease: 1_000, wait: 0 })
  const second = next.request<{ token: string }>({ op: 'hold', key, lease: 1_000, wait: 20_000 }, 30_000)
  await until(async () => (await queueLength(key)) === 2, 'the second process to queue')
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
