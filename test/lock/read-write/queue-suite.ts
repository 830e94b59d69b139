/**
 * What a read-write lock on a queue recipe (etcd's `rwmutex`, Curator's
 * InterProcessReadWriteLock on ZooKeeper) must do, whatever the store: many readers at once, a
 * writer alone across real processes (counted in a shared directory), a reader after a waiting
 * writer waits behind it, a SIGKILLed reader's entry ending with its lease or session, read →
 * write upgrade rejected at once, tokens increasing from holder to holder, bad input typed.
 * Each store's test file hands it the store's set-up and how to read its queue.
 */
import { mkdtempSync, readdirSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { InvalidArgumentError, LockBusyError, LockUpgradeError } from '../../../src/errors.js'
import type { Locks } from '../../../src/lock/index.js'
import { until } from '../../support/timing.js'
import { forkWorker, type Worker } from '../../support/workers.js'

const WORKER = new URL('./queue-worker.ts', import.meta.url)

/** One store under the suite. */
export interface QueueStore {
  /** `etcd`, `zookeeper`: in the suite's name and log lines. */
  readonly label: string
  readonly available: boolean
  /** What a queued holder is in this store (`key`, `node`) and what ends it (`lease`, `session`). */
  readonly entry: string
  readonly liveness: string
  /** How long a dead holder's entry may last, for the log line (`TTL 1 s`). */
  readonly livenessBound: string
  start(): Promise<void>
  stop(): Promise<void>
  /** A new `Locks` on the store, namespace `rw`. */
  newLocks(): Locks<unknown>
  /** The queue of `name`, oldest first, as `read` / `write`. */
  queued(name: string): Promise<string[]>
  /** The environment of a `queue-worker.ts` child on this store. */
  workerEnv(): Record<string, string>
}

export function readWriteQueueSuite(store: QueueStore): void {
  describe.skipIf(!store.available)(`read-write locks (${store.label})`, () => {
    let inside: string
    let count = 0
    const fresh = () => `rw-${++count}`
    const opened: Locks<unknown>[] = []
    const workers: Worker[] = []
    const newLocks = () => {
      const locks = store.newLocks()
      opened.push(locks)
      return locks
    }
    const queued = (name: string) => store.queued(name)
    const spawn = async () => {
      const worker = await forkWorker(WORKER, { env: { ...store.workerEnv(), INSIDE_DIR: inside } })
      workers.push(worker)
      return worker
    }

    beforeAll(async () => {
      await store.start()
      inside = mkdtempSync(path.join(os.tmpdir(), `sg-rw-${store.label}-`))
    })
    afterEach(async () => {
      await Promise.all(opened.splice(0).map((l) => l.close()))
      await Promise.all(workers.splice(0).map((w) => w.stop()))
    })
    afterAll(async () => {
      await store.stop()
      rmSync(inside, { recursive: true, force: true })
    })

    it('readers share it (5 at once), a writer has it alone, and tokens grow', async () => {
      const name = fresh()
      const rw = newLocks().readWrite(name)
      const readers = []
      for (let i = 0; i < 5; i++) readers.push(await rw.acquireRead({ wait: 0 }))
      expect(await queued(name)).toEqual(['read', 'read', 'read', 'read', 'read'])
      await expect(newLocks().readWrite(name).acquireWrite({ wait: 100 })).rejects.toBeInstanceOf(LockBusyError)
      await Promise.all(readers.map((r) => r.release()))
      const writer = await rw.acquireWrite({ wait: 0 })
      for (const reader of readers) expect(writer.token).toBeGreaterThan(reader.token)
      await expect(newLocks().readWrite(name).acquireRead({ wait: 100 })).rejects.toBeInstanceOf(LockBusyError)
      await expect(newLocks().readWrite(name).acquireWrite({ wait: 0 })).rejects.toBeInstanceOf(LockBusyError)
      await writer.release()
      await rw.read(async ({ token }) => expect(token).toBeGreaterThan(writer.token))
      expect(await queued(name)).toEqual([])
    })

    it('the read-write lock and the mutex on the same name are different locks', async () => {
      const name = fresh()
      const locks = newLocks()
      const mutex = await locks.acquire(name, { wait: 0 })
      const writer = await locks.readWrite(name).acquireWrite({ wait: 0 })
      await Promise.all([writer.release(), mutex.release()])
    })

    it('readers and writers in three processes: never a writer with anyone else, counted in a shared directory', async () => {
      const name = fresh()
      const all = await Promise.all([spawn(), spawn(), spawn()])
      const results = await Promise.all(
        all.map((w) =>
          w.request<{ sections: number; violations: number; maxReaders: number }>(
            { op: 'mix', name, rounds: 40, writeEvery: 4 },
            120_000,
          ),
        ),
      )
      const sections = results.reduce((n, r) => n + r.sections, 0)
      const violations = results.reduce((n, r) => n + r.violations, 0)
      const maxReaders = Math.max(...results.map((r) => r.maxReaders))
      console.log(
        `[${store.label} rw processes] ${sections} sections (30 writes), ${violations} overlaps, at most ${maxReaders} readers together`,
      )
      expect(sections).toBe(120)
      expect(violations).toBe(0)
      expect(readdirSync(inside)).toEqual([])
    })

    it('a reader that comes after a waiting writer waits behind it; the writer is served first', async () => {
      const name = fresh()
      const [a, b, c] = [newLocks(), newLocks(), newLocks()]
      const first = await a.readWrite(name).acquireRead({ wait: 0 })
      const order: string[] = []
      const writer = b
        .readWrite(name)
        .acquireWrite({ wait: '20s' })
        .then((h) => (order.push('writer'), h))
      await until(async () => (await queued(name)).length === 2, 'the writer to queue')
      // Only a reader holds it, yet a new reader is refused: it would overtake the waiting writer.
      await expect(c.readWrite(name).acquireRead({ wait: 0 })).rejects.toBeInstanceOf(LockBusyError)
      const later = c
        .readWrite(name)
        .acquireRead({ wait: '20s' })
        .then((h) => (order.push('reader'), h))
      await until(async () => (await queued(name)).length === 3, 'the later reader to queue')
      await first.release()
      const held = await writer
      expect(order).toEqual(['writer'])
      expect(await queued(name)).toEqual(['write', 'read'])
      await held.release()
      const reader = await later
      expect(order).toEqual(['writer', 'reader'])
      expect(held.token).toBeGreaterThan(first.token)
      expect(reader.token).toBeGreaterThan(held.token)
      await reader.release()
    })

    it(`a SIGKILLed reader's ${store.entry} ends with its ${store.liveness}, and the waiting writer gets in`, async () => {
      const name = fresh()
      const worker = await spawn()
      await worker.request({ op: 'read', name, lease: 1_000, wait: 0 })
      const survivor = await newLocks().readWrite(name).acquireRead({ wait: 0 })
      const waiting = newLocks().readWrite(name).acquireWrite({ wait: '20s' })
      await until(async () => (await queued(name)).length === 3, 'the writer to queue')
      const killedAt = performance.now()
      worker.kill('SIGKILL')
      // The survivor is kept alive meanwhile: the dead reader's entry still goes, with its own lease or session.
      await until(async () => (await queued(name)).length === 2, "the dead reader's entry to expire", 15_000)
      const goneAfterMs = performance.now() - killedAt
      expect(await queued(name)).toEqual(['read', 'write'])
      expect(survivor.signal.aborted).toBe(false)
      await survivor.release()
      const held = await waiting
      console.log(
        `[${store.label} rw dead reader] its ${store.entry} gone ${goneAfterMs.toFixed(0)} ms after the SIGKILL (${store.livenessBound}); writer in after the survivor's release`,
      )
      await held.release()
    })

    it(`a writer that gives up takes its ${store.entry} away, and the reader queued behind it gets in while the first reader holds`, async () => {
      const name = fresh()
      const [a, b, c] = [newLocks(), newLocks(), newLocks()]
      const first = await a.readWrite(name).acquireRead({ wait: 0 })
      const writer = b.readWrite(name).acquireWrite({ wait: 500 })
      await until(async () => (await queued(name)).length === 2, 'the writer to queue')
      const later = c.readWrite(name).acquireRead({ wait: '20s' })
      await until(async () => (await queued(name)).length === 3, 'the later reader to queue')
      await expect(writer).rejects.toBeInstanceOf(LockBusyError)
      const reader = await later
      expect(await queued(name)).toEqual(['read', 'read'])
      await Promise.all([reader.release(), first.release()])
    })

    it('read → write in one call chain rejects at once with LockUpgradeError, queueing nothing; the read lock stays held', async () => {
      const name = fresh()
      const rw = newLocks().readWrite(name)
      await rw.read(async ({ signal }) => {
        await expect(rw.write(async () => 'never')).rejects.toBeInstanceOf(LockUpgradeError)
        await expect(rw.acquireWrite()).rejects.toBeInstanceOf(LockUpgradeError)
        expect(await queued(name)).toEqual(['read'])
        expect(signal.aborted).toBe(false)
      })
      await rw.write(async ({ token }) => rw.read(async (inner) => expect(inner.token).toBe(token)))
    })

    it('tokens strictly increase from holder to holder across readers and writers of several Locks', async () => {
      const name = fresh()
      const [a, b] = [newLocks(), newLocks()]
      let last = 0n
      for (let i = 0; i < 12; i++) {
        const rw = (i % 2 ? a : b).readWrite(name)
        const run = async ({ token }: { token: bigint }) => {
          expect(token).toBeGreaterThan(last)
          last = token
        }
        await (i % 3 === 0 ? rw.write(run) : rw.read(run))
      }
    })

    it('bad input is a typed error naming the argument, and queues nothing', async () => {
      const locks = newLocks()
      expect(() => locks.readWrite('')).toThrow(expect.objectContaining({ argument: 'name' }))
      expect(() => locks.readWrite(7 as never)).toThrow(InvalidArgumentError)
      const rw = locks.readWrite('ok')
      await expect(rw.read(5 as never)).rejects.toMatchObject({ argument: 'fn' })
      await expect(rw.write(() => {}, { lease: 1 })).rejects.toMatchObject({ argument: 'lease' })
      await expect(rw.acquireRead({ wait: -1 })).rejects.toMatchObject({ argument: 'wait' })
      await expect(rw.acquireWrite({ color: 'red' } as never)).rejects.toMatchObject({ argument: 'color' })
      expect(await queued('ok')).toEqual([])
      await rw.read(async () => expect(await queued('ok')).toEqual(['read'])) // the check can see a key
    })
  })
}
