/**
 * A lock holder in its own process, for the cross-process lock tests: it builds its Locks
 * with a coupon factory module (argv[2]) and answers `LockWorkerRequest`s. It can be
 * SIGKILLed or SIGSTOPped by the test like any app instance.
 *
 * env LOCK_WORKER_CONFIG = JSON { backend, checkPort, database? }: `backend` goes to the
 * factory; `checkPort` is the redis-server holding the test's own counter and fenced key.
 */
import path from 'node:path'
import { pathToFileURL } from 'node:url'
import { Redis } from 'ioredis'
import type { HeldLockHandle } from '../../src/index.js'
import { serveRequests } from './worker-side.js'
import type { LockFactory } from './coupons/protocol.js'
import { FENCED_SET_LUA, type LockWorkerRequest } from './lock-worker-protocol.js'

const config = JSON.parse(process.env.LOCK_WORKER_CONFIG ?? '{}') as {
  backend: unknown
  checkPort: number
  database?: string
}
const factory = (await import(pathToFileURL(path.resolve(process.argv[2]!)).href)).default as LockFactory
const { locks } = await factory(config.backend)
const check = new Redis({ host: '127.0.0.1', port: config.checkPort })
const held = new Map<string, HeldLockHandle<unknown>>()
const pool = config.database ? await (await import('./databases.js')).pgPool(config.database, { max: 2 }) : undefined

function tokenOf(lock: HeldLockHandle<unknown>): string | null {
  try {
    return lock.token.toString()
  } catch {
    return null // Redlock
  }
}

serveRequests(async (request: LockWorkerRequest) => {
  switch (request.op) {
    case 'acquire': {
      const lock = await locks.acquire(request.key, { lease: request.lease, wait: request.wait })
      held.set(request.key, lock)
      return { token: tokenOf(lock), at: Date.now() }
    }
    case 'state': {
      const lock = held.get(request.key)
      return {
        aborted: lock?.signal.aborted ?? false,
        reason: lock?.signal.aborted ? String((lock.signal.reason as Error)?.message) : undefined,
      }
    }
    case 'release':
      await held.get(request.key)?.release()
      held.delete(request.key)
      return true
    case 'contend': {
      // INCR on entry, DECR on exit: seeing more than 1 means two holders at once.
      // tolerateErrors (failover tests): a call that failed (Redis unreachable mid-failover)
      // is counted and the loop goes on (after a short back-off, not to spin through an
      // outage). stopKey: stop early once that key exists on the check server.
      let violations = 0
      const errors: string[] = []
      for (let i = 0; i < request.iterations; i++) {
        if (request.stopKey && (await check.exists(request.stopKey))) break
        const call = locks.withLock(
          request.key,
          async () => {
            const inside = await check.incr('inside')
            if (inside !== 1) violations++
            await check.incr('entries')
            await new Promise((resolve) => setImmediate(resolve))
            await check.decr('inside')
          },
          { lease: request.lease, wait: '60s' },
        )
        if (!request.tolerateErrors) await call
        else
          await call.catch(async (error: Error) => {
            errors.push(`${error.name}: ${error.message}`)
            await new Promise((resolve) => setTimeout(resolve, 50))
          })
      }
      return { violations, errors }
    }
    case 'fenced-write': {
      // The holder writes with its token, whether or not it still holds the lock: the
      // resources must refuse it if a newer holder has written.
      const lock = held.get(request.key)!
      const token = lock.token.toString()
      const sql = await pool!.query(
        `UPDATE "${request.schema}".fenced SET value = $1, fence = $2 WHERE id = 1 AND fence < $2`,
        [request.value, token],
      )
      const redis = await check.eval(FENCED_SET_LUA, 2, 'fenced:value', 'fenced:fence', request.value, token)
      return { sqlRows: sql.rowCount, redisWritten: redis === 1 }
    }
  }
})
