/**
 * Read-write locks on Redis: shared reads, exclusive writes, writers first, each holder's
 * own lease (renewed; a SIGKILLed reader's lease ends on its own), no renewals after a
 * reentrant unlock, read → write upgrade rejected at once, bad input, a random mix checked
 * with fast-check.
 */
import fc from 'fast-check'
import { createHash } from 'node:crypto'
import type { Redis } from 'ioredis'
import { afterEach, describe, expect, it } from 'vitest'
import { InvalidArgumentError, LockBusyError, LockUpgradeError } from '../../../src/errors.js'
import { createLocks, type Locks } from '../../../src/lock/index.js'
import { readWriteKeys } from '../../../src/lock/read-write/redis.js'
import { scriptSource } from '../../../src/redis/scripts.js'
import { useRedisServer } from '../../support/redis-suite.js'
import { sleep, until } from '../../support/timing.js'
import { forkWorker, type Worker } from '../../support/workers.js'

const WORKER = new URL('./reader-worker.ts', import.meta.url)
const RENEW_SHA = createHash('sha1')
  .update(scriptSource(new URL('../../../src/lock/read-write/renew.lua', import.meta.url)))
  .digest('hex')

/** Counts the renew.lua calls `client` sends from now on. */
function countRenewals(client: Redis): { readonly calls: number } {
  const counter = { calls: 0 }
  const send = client.sendCommand.bind(client)
  client.sendCommand = ((command: { name: string; args: unknown[] }, ...rest: unknown[]) => {
    if (/^eval(sha)?$/i.test(command.name)) {
      const sha = /sha/i.test(command.name)
        ? String(command.args[0])
        : createHash('sha1').update(String(command.args[0])).digest('hex')
      if (sha === RENEW_SHA) counter.calls++
    }
    return (send as (...a: unknown[]) => unknown)(command, ...rest)
  }) as typeof client.sendCommand
  return counter
}

describe('read-write locks (Redis)', () => {
  const redis = useRedisServer()
  let count = 0
  const fresh = () => `rw-${++count}`
  const opened: Locks[] = []
  const newLocks = (client = redis.server().client()) => {
    const locks = createLocks({ redis: client, lease: '1s', namespace: 'rw' })
    opened.push(locks)
    return locks
  }
  const workers: Worker[] = []
  afterEach(async () => {
    await Promise.all(opened.splice(0).map((l) => l.close()))
    await Promise.all(workers.splice(0).map((w) => w.stop()))
  })

  it('readers share it, a writer has it alone, and tokens grow', async () => {
    const name = fresh()
    const [a, b] = [newLocks(), newLocks()]
    const first = await a.readWrite(name).acquireRead()
    const second = await b.readWrite(name).acquireRead({ wait: 0 })
    await expect(a.readWrite(name).acquireWrite({ wait: 100 })).rejects.toBeInstanceOf(LockBusyError)
    await first.release()
    await second.release()
    const writer = await a.readWrite(name).acquireWrite({ wait: 0 })
    expect(writer.token).toBeGreaterThan(second.token)
    await expect(b.readWrite(name).acquireRead({ wait: 100 })).rejects.toBeInstanceOf(LockBusyError)
    await expect(b.readWrite(name).acquireWrite({ wait: 100 })).rejects.toBeInstanceOf(LockBusyError)
    await writer.release()
    await b.readWrite(name).read(async ({ token }) => expect(token).toBeGreaterThan(writer.token))
  })

  it('a writer is not starved by a stream of overlapping readers: new readers wait behind it', async () => {
    const name = fresh()
    const readers = newLocks()
    const writers = newLocks()
    const rw = readers.readWrite(name)
    let stop = false
    let readsAfterWriterQueued = 0
    let writerQueued = false
    // 4 readers in a loop, each holding 100 ms: at any moment some reader is in.
    const stream = Array.from({ length: 4 }, async (_, i) => {
      await sleep(i * 25)
      while (!stop) {
        await rw.read(async () => {
          if (writerQueued) readsAfterWriterQueued++
          await sleep(100)
        })
      }
    })
    await sleep(300)
    const startedAt = performance.now()
    writerQueued = true
    const waitedMs = await writers.readWrite(name).write(async () => performance.now() - startedAt, { wait: '5s' })
    stop = true
    await Promise.all(stream)
    console.log(
      `[rw writers first] writer got in after ${waitedMs.toFixed(0)} ms behind 4 readers of 100 ms; ${readsAfterWriterQueued} reads began after it queued`,
    )
    // The readers inside finish (≤ 100 ms each), no new ones start: well under the 5 s wait.
    expect(waitedMs).toBeLessThan(1_500)
    // At most the readers whose attempt was already on its way when the writer queued.
    expect(readsAfterWriterQueued).toBeLessThanOrEqual(4)
  })

  it('a writer that gives up lets the readers it kept out in at once', async () => {
    const name = fresh()
    const [a, b, c] = [newLocks(), newLocks(), newLocks()]
    const reader = await a.readWrite(name).acquireRead()
    const writer = b.readWrite(name).acquireWrite({ wait: 400 })
    await until(async () => (await redis.admin().zcard(`rw:{rw:${name}}:wanted`)) === 1, 'the writer to queue')
    const blocked = c.readWrite(name).acquireRead({ wait: '5s' })
    await expect(writer).rejects.toBeInstanceOf(LockBusyError)
    const startedAt = performance.now()
    const next = await blocked
    expect(performance.now() - startedAt).toBeLessThan(500)
    await Promise.all([next.release(), reader.release()])
  })

  it('read locks are renewed: a reader holding three leases keeps the writer out, and its signal never aborts', async () => {
    const name = fresh()
    const [a, b] = [newLocks(), newLocks()]
    await a.readWrite(name).read(
      async ({ signal }) => {
        await sleep(1_000)
        await expect(b.readWrite(name).acquireWrite({ wait: 0 })).rejects.toBeInstanceOf(LockBusyError)
        expect(signal.aborted).toBe(false)
      },
      { lease: 300 },
    )
    await (await b.readWrite(name).acquireWrite({ wait: 0 })).release()
  })

  it("a SIGKILLed reader's lease ends on its own, though a surviving reader keeps renewing", async () => {
    const name = fresh()
    const lease = 1_000
    const worker = await forkWorker(WORKER, { env: { REDIS_URL: redis.server().url } })
    workers.push(worker)
    await worker.request({ op: 'read', name, lease })
    const [survivorLocks, writerLocks] = [newLocks(), newLocks()]
    const survivor = await survivorLocks.readWrite(name).acquireRead({ lease })
    const writer = writerLocks
      .readWrite(name)
      .acquireWrite({ wait: '20s' })
      .then((held) => ({ held, at: performance.now() }))
    const readers = `rw:{rw:${name}}:readers`
    expect(await redis.admin().zcard(readers)).toBe(2)
    const killedAt = performance.now()
    worker.kill('SIGKILL')
    // Three leases of the survivor renewing (every lease/3): the dead reader must still go.
    await sleep(3 * lease)
    const [now] = await redis.admin().time()
    const live = await redis.admin().zrangebyscore(readers, Number(now) * 1000, '+inf')
    expect(live).toHaveLength(1)
    expect(survivor.signal.aborted).toBe(false)
    const releasedAt = performance.now()
    await survivor.release()
    const { held, at } = await writer
    console.log(
      `[rw dead reader] killed at 0 ms; survivor released at ${(releasedAt - killedAt).toFixed(0)} ms; writer in at ${(at - killedAt).toFixed(0)} ms`,
    )
    expect(at - releasedAt).toBeLessThan(1_000)
    await held.release()
  })

  it('a SIGKILLed reader alone: the writer gets in about one lease later', async () => {
    const name = fresh()
    const lease = 1_000
    const worker = await forkWorker(WORKER, { env: { REDIS_URL: redis.server().url } })
    workers.push(worker)
    await worker.request({ op: 'read', name, lease })
    const writer = newLocks().readWrite(name)
    const waiting = writer.acquireWrite({ wait: '20s' })
    await until(async () => (await redis.admin().zcard(`rw:{rw:${name}}:wanted`)) === 1, 'the writer to queue')
    const killedAt = performance.now()
    worker.kill('SIGKILL')
    const held = await waiting
    const afterMs = performance.now() - killedAt
    console.log(`[rw dead reader alone] writer in ${afterMs.toFixed(0)} ms after the SIGKILL (lease ${lease} ms)`)
    expect(afterMs).toBeGreaterThan(lease / 2) // it waited for the dead reader's lease (renewed ≤ lease/3 before the kill)
    expect(afterMs).toBeLessThan(lease + 1_500)
    await held.release()
  })

  it('no renewals after a reentrant unlock: the nested read shares the outer hold, and the outer release stops them', async () => {
    const name = fresh()
    const client = redis.server().client()
    const renewals = countRenewals(client)
    const locks = newLocks(client)
    const rw = locks.readWrite(name)
    await rw.read(
      async () => {
        await rw.read(async () => sleep(50)) // nested: reuses the outer hold, renews nothing of its own
        await sleep(350) // the outer one renews every 100 ms
      },
      { lease: 300 },
    )
    const during = renewals.calls
    expect(during).toBeGreaterThanOrEqual(2)
    expect(during).toBeLessThanOrEqual(5)
    await sleep(700)
    expect(renewals.calls).toBe(during)
    expect(await redis.admin().exists(`rw:{rw:${name}}:readers`)).toBe(0)
  })

  it('read → write in one call chain rejects at once with LockUpgradeError; the read lock stays held', async () => {
    const name = fresh()
    const locks = newLocks()
    const rw = locks.readWrite(name)
    await rw.read(async ({ signal }) => {
      const startedAt = performance.now()
      await expect(rw.write(async () => 'never')).rejects.toBeInstanceOf(LockUpgradeError)
      await expect(rw.acquireWrite()).rejects.toBeInstanceOf(LockUpgradeError)
      expect(performance.now() - startedAt).toBeLessThan(100)
      expect(signal.aborted).toBe(false)
      expect(await redis.admin().zcard(`rw:{rw:${name}}:readers`)).toBe(1)
    })
    // A read inside a write runs under the write lock.
    await rw.write(async ({ token }) => rw.read(async (inner) => expect(inner.token).toBe(token)))
  })

  it('await using releases the read and write handles at the end of their scope, in the store', async () => {
    const name = fresh()
    const [locks, other] = [newLocks(), newLocks()]
    const rw = locks.readWrite(name)
    const admin = redis.admin()
    // The holders in the store: readers, the writer, waiting writers (the token counter stays).
    const { readers, writer, wanted } = readWriteKeys('rw', name)
    const keysOf = () => admin.exists(readers, writer, wanted)
    const events: string[] = []
    locks.on('acquired', () => events.push('acquired'))
    locks.on('released', () => events.push('released'))
    const empty = 0
    expect(await keysOf()).toBe(empty)
    let readToken: bigint
    {
      await using read = await rw.acquireRead()
      readToken = read.token
      expect(await keysOf()).toBeGreaterThan(empty)
      // Another process's writer is kept out while the read handle is in scope.
      await expect(other.readWrite(name).acquireWrite({ wait: 0 })).rejects.toBeInstanceOf(LockBusyError)
    }
    expect(events).toEqual(['acquired', 'released'])
    expect(await keysOf()).toBe(empty)
    {
      await using write = await rw.acquireWrite()
      expect(write.token).toBeGreaterThan(readToken)
      await expect(other.readWrite(name).acquireRead({ wait: 0 })).rejects.toBeInstanceOf(LockBusyError)
    }
    expect(events).toEqual(['acquired', 'released', 'acquired', 'released'])
    // Both gone from the store: another instance takes the write lock at once.
    const next = await other.readWrite(name).acquireWrite({ wait: 0 })
    await next.release()
    // An error thrown in the scope still releases.
    await expect(
      (async () => {
        await using _write = await rw.acquireWrite()
        throw new Error('boom')
      })(),
    ).rejects.toThrow('boom')
    expect(events.slice(-2)).toEqual(['acquired', 'released'])
    expect(await keysOf()).toBe(empty)
  })

  it('events are the mutex events, keyed by the name', async () => {
    const name = fresh()
    const locks = newLocks()
    const events: string[] = []
    locks.on('acquired', (e) => events.push(`acquired ${e.key}`))
    locks.on('released', (e) => events.push(`released ${e.key}`))
    locks.on('busy', (e) => events.push(`busy ${e.key}`))
    const rw = locks.readWrite(name)
    await rw.write(async () => {
      await expect(newLocks().readWrite(name).acquireRead({ wait: 0 })).rejects.toBeInstanceOf(LockBusyError)
    })
    await rw.read(() => {})
    expect(events).toEqual([`acquired ${name}`, `released ${name}`, `acquired ${name}`, `released ${name}`])
  })

  it('bad input is a typed error naming the argument, and sends nothing', async () => {
    const client = redis.server().client()
    await client.ping()
    const locks = newLocks(client)
    const before = Number((await redis.admin().info('stats')).match(/total_commands_processed:(\d+)/)![1])
    expect(() => locks.readWrite('')).toThrow(expect.objectContaining({ argument: 'name' }))
    expect(() => locks.readWrite(7 as never)).toThrow(InvalidArgumentError)
    const rw = locks.readWrite('ok')
    await expect(rw.read(5 as never)).rejects.toMatchObject({ argument: 'fn' })
    await expect(rw.write(() => {}, { lease: 1 })).rejects.toMatchObject({ argument: 'lease' })
    await expect(rw.acquireRead({ wait: -1 })).rejects.toMatchObject({ argument: 'wait' })
    await expect(rw.acquireWrite({ color: 'red' } as never)).rejects.toMatchObject({ argument: 'color' })
    const after = Number((await redis.admin().info('stats')).match(/total_commands_processed:(\d+)/)![1])
    expect(after - before).toBe(1) // the INFO above
    const redlock = createLocks({ redlock: [client] })
    opened.push(redlock)
    expect(() => redlock.readWrite('x')).toThrow(expect.objectContaining({ argument: 'readWrite' }))
  })

  it("any mix of readers and writers from three processes' worth of Locks: never a writer with anyone else", async () => {
    const clients = [newLocks(), newLocks(), newLocks()]
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.tuple(fc.integer({ min: 0, max: 2 }), fc.boolean(), fc.integer({ min: 0, max: 15 })), {
          minLength: 4,
          maxLength: 12,
        }),
        async (ops) => {
          const name = fresh()
          let readers = 0
          let writers = 0
          let violations = 0
          await Promise.all(
            ops.map(async ([who, write, holdMs], i) => {
              await sleep(i * 3)
              const rw = clients[who]!.readWrite(name)
              const section = async () => {
                if (write) writers++
                else readers++
                if (writers > 1 || (writers === 1 && readers > 0)) violations++
                await sleep(holdMs)
                if (write) writers--
                else readers--
              }
              await (write ? rw.write(section, { wait: '10s' }) : rw.read(section, { wait: '10s' }))
            }),
          )
          expect(violations).toBe(0)
        },
      ),
      { numRuns: 15 },
    )
  })
})
