/**
 * The PostgreSQL semaphore: rows leased on the server clock, a FIFO line with heartbeats,
 * NOTIFY wake-ups. The shared semaphore tests (./backend-suite.ts), and its own known
 * failures: an expired permit's release reported lost, its renewal after the expiry
 * resurrecting nothing.
 */
import type { Pool } from 'pg'
import { describe, expect, it } from 'vitest'
import { createLocks, LockLostError } from '../../../src/index.js'
import { createPostgresDatabase, POSTGRES, postgresAvailable } from '../../support/databases.js'
import { redisAvailable } from '../../support/redis.js'
import { until } from '../../support/timing.js'
import { semaphoreBackendSuite } from './backend-suite.js'

describe.skipIf(!postgresAvailable || !redisAvailable)('locks.semaphore() on PostgreSQL', () => {
  let pool: Pool
  const table = '"stampede_guard".semaphore_permits'
  const line = '"stampede_guard".semaphore_line'
  const count = async (sql: string, name: string) =>
    Number((await pool.query(`SELECT count(*) AS n FROM ${sql} WHERE name = $1`, [name])).rows[0].n)
  const suite = semaphoreBackendSuite({
    label: 'pg',
    async start() {
      const db = await createPostgresDatabase('semaphore')
      pool = await db.pool({ max: 20 })
      const locks = createLocks({ postgres: pool, namespace: 'sem' })
      return {
        locks,
        worker: { postgresDatabase: db.name },
        stop: () => db.drop(),
        port: POSTGRES.port,
        via: (proxyPort) => ({ postgresDatabase: db.name, postgresPort: proxyPort }),
      }
    },
    inLine: (name) => count(line, name),
    countsHolders: false,
    empty: async (name) => (await count(table, name)) === 0 && (await count(line, name)) === 0,
    crash: { lease: 1_500, withinMs: 1_500 + 2_000 },
    fleet: { holders: 20, holdMs: 3 },
    holderRecords: (name) => count(table, name),
    expiry: async (name) =>
      Number(
        (
          await pool.query(
            `SELECT extract(epoch FROM expires_at - clock_timestamp()) * 1000 AS ms FROM ${table} WHERE name = $1`,
            [name],
          )
        ).rows[0].ms,
      ),
    race: { lease: 300, rounds: 100 },
    reset: {
      marker: () => 'semaphore_acquire',
      outcome: 'failed',
      why: 'the pg driver never resends a query; the store gives back whatever the unanswered attempt took',
    },
  })

  it('waits that come and go leave nothing on the pool connection they listened on: no listener, no LISTEN', async () => {
    const db = await createPostgresDatabase('semaphore_listen')
    const single = await db.pool({ max: 2 }) // the listening connection comes back to this pool each time
    const locks = createLocks({ postgres: single, namespace: 'sem' })
    try {
      const sem = locks.semaphore('listen', { permits: 1 })
      for (let cycle = 0; cycle < 12; cycle++) {
        const holder = await sem.acquire(1)
        const waiting = sem.acquire(1, { wait: '10s' }) // listens while it waits
        waiting.catch(() => {}) // awaited below; a failure above must not leave it unhandled
        const inLine = async () =>
          Number((await single.query(`SELECT count(*) AS n FROM ${line} WHERE name = 'listen'`)).rows[0].n)
        await until(async () => (await inLine()) === 1, 'the waiter in line')
        await holder.release()
        await (await waiting).release()
      }
      await until(() => single.idleCount === single.totalCount, 'every connection back in the pool')
      const clients = await Promise.all(Array.from({ length: single.totalCount }, () => single.connect()))
      const listeners = clients.map((client) => ({
        notification: client.listenerCount('notification'),
        error: client.listenerCount('error'),
      }))
      const listening = await clients[0]!.query('SELECT count(*)::int AS n FROM pg_listening_channels()')
      clients.forEach((client) => client.release())
      // Before: each wait added a 'notification' and an 'error' listener to the connection it
      // borrowed and gave it back still listening (12 cycles: 12 of each, a MaxListeners warning).
      expect(listeners.map((l) => l.notification)).toEqual(clients.map(() => 0))
      expect(Math.max(...listeners.map((l) => l.error))).toBeLessThanOrEqual(1) // pg's pool adds its own one
      expect(listening.rows[0].n).toBe(0)
    } finally {
      await locks.close()
      await db.drop()
    }
  })

  it('releasing an expired permit reports it lost; its renewal after the expiry resurrects nothing', async () => {
    const sem = suite.locks().semaphore('pg-expired', { permits: 1 })
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
})
