/**
 * An abort racing a grant, on Redis, for the semaphore, the fair lock's hand-off, a read
 * lock and withLocks: the waiter's signal aborts just as the holder releases (at once, a
 * turn of the event loop later, 1-3 ms later), so some rounds end granted and some aborted
 * (about half each on an idle box). Whatever won, nothing is left held: the next holder
 * gets in within a bounded wait far below the 20 s lease.
 */
import { afterEach, describe, expect, it } from 'vitest'
import { createLocks, type Locks } from '../../../src/lock/index.js'
import { useRedisServer } from '../../support/redis-suite.js'

const tick = (ms: number) => new Promise((r) => setTimeout(r, ms))
/** Aborts at a point that moves round by round: at once, after a turn of the event loop, or 1-3 ms later. */
async function abortAfter(abort: AbortController, round: number): Promise<void> {
  const step = round % 5
  if (step === 0) abort.abort()
  else if (step === 1) await new Promise<void>((r) => setImmediate(() => r(abort.abort())))
  else await tick(step - 1).then(() => abort.abort())
}

describe('aborts racing grants (Redis)', () => {
  const redis = useRedisServer()
  const opened: Locks[] = []
  const newLocks = (extra: Record<string, unknown> = {}) => {
    const locks = createLocks({ redis: redis.server().client(), lease: '20s', namespace: 'ar', ...extra })
    opened.push(locks)
    return locks
  }
  afterEach(async () => {
    await Promise.all(opened.splice(0).map((l) => l.close()))
  })

  it('semaphore: an abort racing the grant never leaves a permit held', async () => {
    const [a, b] = [newLocks(), newLocks()]
    const name = 'sem-race'
    for (let i = 0; i < 150; i++) {
      const holder = await a.semaphore(name, { permits: 1 }).acquire()
      const abort = new AbortController()
      const pending = b
        .semaphore(name, { permits: 1 })
        .acquire(1, { wait: '5s', signal: abort.signal })
        .then(
          (p) => p,
          () => undefined,
        )
      await tick(i % 5)
      const rel = holder.release()
      await rel
      // After the release: the waiter is being woken, its attempt in flight or its grant on its way back.
      await abortAfter(abort, i)
      const got = await pending
      await got?.release()
      const again = await a
        .semaphore(name, { permits: 1 })
        .acquire(1, { wait: '1s' })
        .catch(() => undefined)
      expect(again, `round ${i}: a permit was left held`).toBeDefined()
      await again!.release()
    }
  })

  it('fair lock: an abort racing the hand-off never leaves the lock held', async () => {
    const [a, b] = [newLocks({ fair: true }), newLocks({ fair: true })]
    for (let i = 0; i < 150; i++) {
      const key = `fair-race`
      const holder = await a.acquire(key)
      const abort = new AbortController()
      const pending = b.acquire(key, { wait: '5s', signal: abort.signal }).then(
        (l) => l,
        () => undefined,
      )
      await tick(1 + (i % 5))
      const rel = holder.release()
      await rel
      // After the release: the waiter is being woken, its attempt in flight or its grant on its way back.
      await abortAfter(abort, i)
      const got = await pending
      await got?.release()
      const again = await a.acquire(key, { wait: '1s' }).catch(() => undefined)
      expect(again, `round ${i}: the lock was left held`).toBeDefined()
      await again!.release()
    }
  })

  it('read-write: an abort racing a read grant never leaves a reader behind', async () => {
    const [a, b] = [newLocks(), newLocks()]
    for (let i = 0; i < 150; i++) {
      const name = 'rw-race'
      const writer = await a.readWrite(name).acquireWrite()
      const abort = new AbortController()
      const pending = b
        .readWrite(name)
        .acquireRead({ wait: '5s', signal: abort.signal })
        .then(
          (l) => l,
          () => undefined,
        )
      await tick(1 + (i % 5))
      const rel = writer.release()
      await rel
      // After the release: the waiter is being woken, its attempt in flight or its grant on its way back.
      await abortAfter(abort, i)
      const got = await pending
      await got?.release()
      const again = await a
        .readWrite(name)
        .acquireWrite({ wait: '1s' })
        .catch(() => undefined)
      expect(again, `round ${i}: a reader was left behind`).toBeDefined()
      await again!.release()
    }
  })

  it('withLocks: an abort racing the grant leaves no key held', async () => {
    const [a, b] = [newLocks(), newLocks()]
    for (let i = 0; i < 150; i++) {
      const keys = ['wl-x', 'wl-y', 'wl-z']
      const holder = await a.acquire('wl-y')
      const abort = new AbortController()
      const pending = b.withLocks(keys, () => 'ran', { wait: '5s', signal: abort.signal }).catch(() => undefined)
      await tick(1 + (i % 5))
      const rel = holder.release()
      await rel
      // After the release: the waiter is being woken, its attempt in flight or its grant on its way back.
      await abortAfter(abort, i)
      await pending
      for (const key of keys) {
        const again = await a.tryAcquire(key)
        expect(again, `round ${i}: ${key} left held`).toBeDefined()
        await again!.release()
      }
    }
  })
})
