/**
 * The PostgreSQL semaphore: rows leased on the server clock, a FIFO line with heartbeats,
 * NOTIFY wake-ups. In one process: permits, FIFO, an expired release reported lost, a
 * renewal after expiry resurrecting nothing. Across real processes: a SIGKILLed holder's
 * permits back within one lease, and 4 processes × 20 holders never more than N inside,
 * counted by the resource.
 */
import type { Pool } from 'pg'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { createLocks, LockBusyError, LockLostError, type Locks } from '../../../src/index.js'
import { createPostgresDatabase, postgresAvailable, type TestDatabase } from '../../support/databases.js'
import { redisAvailable, startRedis, type RedisServer } from '../../support/redis.js'
import { sleep, until } from '../../support/timing.js'
import type { Worker } from '../../support/workers.js'
import { forkTwoAtATime } from './fork.js'
import type { AcquireReply, ContendReply, SemaphoreWorkerRequest } from './protocol.js'

describe.skipIf(!postgresAvailable || !redisAvailable)('locks.semaphore() on PostgreSQL', () => {
  let db: TestDatabase
  let pool: Pool
  let resourceServer: RedisServer
  let locks: Locks<unknown>
  let workers: Worker[] = []
  const table = '"stampede_guard".semaphore_permits'
  const line = '"stampede_guard".semaphore_line'
  const count = async (sql: string, name: string) =>
    Number((await pool.query(`SELECT count(*) AS n FROM ${sql} WHERE name = $1`, [name])).rows[0].n)

  beforeAll(async () => {
    db = await createPostgresDatabase('semaphore')
    pool = await db.pool({ max: 20 })
    resourceServer = await startRedis()
    locks = createLocks({ postgres: pool, namespace: 'sem' }) as Locks<unknown>
  })
  afterEach(async () => {
    await Promise.all(workers.map((worker) => worker.stop()))
    workers = []
  })
  afterAll(async () => {
    await locks?.close()
    await resourceServer?.stop()
    await db?.drop()
  })

  async function fork(n: number): Promise<Worker[]> {
    const env = {
      SEMAPHORE_WORKER: JSON.stringify({ port: 0, resourcePort: resourceServer.port, postgresDatabase: db.name }),
    }
    const started = await forkTwoAtATime(new URL('./worker.ts', import.meta.url), n, env)
    workers.push(...started)
    return started
  }
  const ask = <T>(worker: Worker, request: SemaphoreWorkerRequest, timeoutMs = 60_000) =>
    worker.request<T>(request, timeoutMs)

  it('permits, tokens, FIFO in line, a wait that runs out leaves the line', async () => {
    const sem = locks.semaphore('pg-fifo', { permits: 2 })
    const a = await sem.acquire(1)
    const b = await sem.acquire(1)
    expect(b.token).toBeGreaterThan(a.token)
    expect(await sem.tryAcquire()).toBeUndefined()
    const order: string[] = []
    const big = sem.acquire(2, { wait: '10s' }).then((p) => (order.push('big'), p))
    await until(async () => (await count(line, 'pg-fifo')) === 1, 'big in line')
    const small = sem.acquire(1, { wait: '10s' }).then((p) => (order.push('small'), p))
    await until(async () => (await count(line, 'pg-fifo')) === 2, 'small in line')
    await expect(sem.acquire(1, { wait: 100 })).rejects.toBeInstanceOf(LockBusyError)
    await until(async () => (await count(line, 'pg-fifo')) === 2, 'the one that gave up to leave', 2_000)
    await a.release()
    await sleep(100)
    expect(order).toEqual([]) // one free, but big (2) is first
    await b.release()
    const bigPermits = await big
    expect(bigPermits.tokens).toHaveLength(2)
    await bigPermits.release()
    await (await small).release()
    expect(order).toEqual(['big', 'small'])
    expect(await count(table, 'pg-fifo')).toBe(0)
  })

  it('releasing an expired permit reports it lost; its renewal after the expiry resurrects nothing', async () => {
    const sem = locks.semaphore('pg-expired', { permits: 1 })
    const held = await sem.acquire(1, { lease: 300 })
    // Expire it on the server, as a long pause would: the watchdog's next renewal finds it gone.
    await pool.query(`UPDATE ${table} SET expires_at = clock_timestamp() - interval '1 second' WHERE name = $1`, [
      'pg-expired',
    ])
    await until(() => held.signal.aborted, 'the renewal to find the permit expired', 5_000)
    expect(held.signal.reason).toBeInstanceOf(LockLostError)
    const other = await sem.acquire(1, { wait: '5s' })
    await expect(held.release()).rejects.toBeInstanceOf(LockLostError)
    expect(await count(table, 'pg-expired')).toBe(1) // the other's, untouched
    await other.release()
  })

  it("a SIGKILLed holder's permits come back within one lease", async () => {
    const [holder, waiter] = await fork(2)
    const lease = 1_500
    await ask(holder!, { op: 'acquire', id: 'a', name: 'pg-crash', permits: 2, count: 2, lease, wait: 0 })
    const next = ask<AcquireReply>(waiter!, {
      op: 'acquire',
      id: 'b',
      name: 'pg-crash',
      permits: 2,
      count: 1,
      lease,
      wait: 30_000,
    })
    await until(async () => (await count(line, 'pg-crash')) === 1, 'the waiter in line', 30_000)
    const killedAt = performance.now()
    holder!.kill('SIGKILL')
    await next
    const afterMs = performance.now() - killedAt
    expect(afterMs).toBeLessThan(lease + 2_000)
    console.log(`[pg semaphore crash] permits back ${afterMs.toFixed(0)} ms after SIGKILL (lease ${lease} ms)`)
  }, 90_000)

  it('4 processes × 20 holders: never more than N inside, counted by the resource', async () => {
    const contenders = await fork(4)
    const resource = resourceServer.client()
    const name = 'pg-fleet'
    const permits = 3
    const results = await Promise.all(
      contenders.map((worker) =>
        ask<ContendReply>(
          worker,
          { op: 'contend', name, permits, holders: 20, iterations: 2, lease: 5_000, holdMs: 3 },
          170_000,
        ),
      ),
    )
    expect(results.flatMap((r) => r.errors)).toEqual([])
    const max = Number(await resource.get(`${name}:max`))
    expect(max).toBeLessThanOrEqual(permits)
    expect(max).toBeGreaterThanOrEqual(2)
    expect(Number(await resource.get(`${name}:entries`))).toBe(4 * 20 * 2)
    expect(await count(table, name)).toBe(0)
    expect(await count(line, name)).toBe(0)
    console.log(`[pg semaphore fleet] 160 entries, at most ${max} inside at once (permits ${permits})`)
  }, 180_000)
})
