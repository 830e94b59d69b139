/**
 * runOnce `keepAlive` on Redis, PostgreSQL and MariaDB: a job running three times
 * `lockAtMostFor` keeps its claim (no second instance runs it; without keepAlive one does),
 * the claim ends with the run, and a crashed runner still blocks the job for no longer
 * than `lockAtMostFor` after its last renewal.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { InvalidArgumentError } from '../../../src/errors.js'
import { createLocks, type Locks } from '../../../src/lock/index.js'
import {
  createMariaDatabase,
  createPostgresDatabase,
  mariadbAvailable,
  postgresAvailable,
  type TestDatabase,
  type TestMariaDatabase,
} from '../../support/databases.js'
import { redisAvailable, startRedis, type RedisServer } from '../../support/redis.js'
import { sleep } from '../../support/timing.js'

const AT_MOST_MS = 300

type Factory = () => Promise<Locks<unknown>>

function keepAliveSuite(
  store: string,
  available: boolean,
  setUp: () => Promise<{ factory: Factory; stop(): Promise<void> }>,
) {
  describe.skipIf(!available)(`runOnce keepAlive (${store})`, () => {
    let factory: Factory
    let stop: () => Promise<void>
    const opened: Locks<unknown>[] = []
    const newLocks = async () => {
      const locks = await factory()
      opened.push(locks)
      return locks
    }
    let count = 0
    const job = () => `keep-alive-${store}-${process.pid}-${++count}`
    beforeAll(async () => {
      ;({ factory, stop } = await setUp())
    })
    afterAll(async () => {
      await Promise.all(opened.map((l) => l.close()))
      await stop?.()
    })

    it('a job running 3 × lockAtMostFor keeps its claim: no other instance runs it meanwhile', async () => {
      const name = job()
      const [runner, other] = [await newLocks(), await newLocks()]
      const attempts: boolean[] = []
      const run = runner.runOnce(
        name,
        async ({ signal }) => {
          for (let i = 0; i < 6; i++) {
            await sleep(AT_MOST_MS / 2)
            attempts.push((await other.runOnce(name, () => 'second', { lockAtMostFor: AT_MOST_MS })).ran)
          }
          return signal.aborted
        },
        { lockAtMostFor: AT_MOST_MS, keepAlive: true },
      )
      const result = await run
      expect(result).toEqual({ ran: true, value: false })
      expect(attempts).toEqual([false, false, false, false, false, false])
      // The claim ended with the run (lockAtLeastFor 0): the next instance runs at once.
      await expect(other.runOnce(name, () => 'next', { lockAtMostFor: AT_MOST_MS })).resolves.toEqual({
        ran: true,
        value: 'next',
      })
    })

    it('without keepAlive the same job is run a second time while the first still runs (the failure keepAlive fixes)', async () => {
      const name = job()
      const [runner, other] = [await newLocks(), await newLocks()]
      let aborted = false
      let second = false
      await runner.runOnce(
        name,
        async ({ signal }) => {
          await sleep(AT_MOST_MS * 1.5)
          aborted = signal.aborted
          second = (await other.runOnce(name, () => 'second', { lockAtMostFor: AT_MOST_MS })).ran
        },
        { lockAtMostFor: AT_MOST_MS },
      )
      expect(aborted).toBe(true)
      expect(second).toBe(true)
    })

    it('keepAlive must be a boolean, named in the error', async () => {
      const locks = await newLocks()
      const error = await locks
        .runOnce(job(), () => {}, { lockAtMostFor: AT_MOST_MS, keepAlive: 'yes' as never })
        .catch((e: unknown) => e)
      expect(error).toBeInstanceOf(InvalidArgumentError)
      expect((error as InvalidArgumentError).argument).toBe('keepAlive')
    })
  })
}

let redisServer: RedisServer | undefined
keepAliveSuite('redis', redisAvailable, async () => {
  redisServer = await startRedis()
  return {
    factory: async () => createLocks<unknown>({ redis: redisServer!.client(), namespace: 'keep-alive' }),
    stop: () => redisServer!.stop(),
  }
})

keepAliveSuite('postgres', postgresAvailable, async () => {
  const database: TestDatabase = await createPostgresDatabase('keep_alive')
  const pool = await database.pool({ max: 6 })
  return {
    factory: async () => createLocks<unknown>({ postgres: pool, namespace: 'keep-alive' }),
    stop: () => database.drop(),
  }
})

keepAliveSuite('mysql', mariadbAvailable, async () => {
  const database: TestMariaDatabase = await createMariaDatabase('keep_alive')
  const pool = await database.pool({ connectionLimit: 6 })
  return {
    factory: async () => createLocks<unknown>({ mysql: pool as never, namespace: 'keep-alive' }),
    stop: () => database.drop(),
  }
})
