/**
 * Smoke tests: every example runs against a private test Redis and exits 0 on its own.
 * The PostgreSQL example runs when a PostgreSQL answers at DATABASE_URL (default
 * 127.0.0.1:5432/test, as in CI); otherwise it is skipped with a visible reason.
 */
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { redisAvailable, startRedis, type RedisServer } from '../support/redis.js'
import { runExample, type ExampleRun } from './run-example.js'

const DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test'

async function postgresReachable(url: string): Promise<string | undefined> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2_000 })
  try {
    await client.connect()
    await client.query('SELECT 1')
    return undefined
  } catch (err) {
    return err instanceof Error ? err.message : String(err)
  } finally {
    await client.end().catch(() => {})
  }
}

const postgresUnavailable = await postgresReachable(DATABASE_URL)
if (postgresUnavailable) {
  console.warn(
    `[test/examples] SKIPPING examples/express-postgres.ts: no PostgreSQL at ` +
      `${new URL(DATABASE_URL).host} (${postgresUnavailable}). Set DATABASE_URL to run it.`,
  )
}

const explain = (run: ExampleRun) =>
  `exit ${run.code} signal ${run.signal}\n--- stdout\n${run.stdout}\n--- stderr\n${run.stderr}`

describe.skipIf(!redisAvailable)('examples (against a private redis-server)', () => {
  let redis: RedisServer
  beforeAll(async () => {
    redis = await startRedis()
  })
  afterAll(async () => {
    await redis?.stop()
  })

  it('get-or-load.ts: 50 concurrent callers, one call of the expensive function', async () => {
    const run = await runExample('get-or-load.ts', { REDIS_URL: redis.url })
    expect(run.code, explain(run)).toBe(0)
    expect(run.stdout).toContain('fetchExchangeRates ran 1 time(s) in total')
  })

  it('express-route.ts: one handler run for a burst of 20 requests', async () => {
    const run = await runExample('express-route.ts', { REDIS_URL: redis.url })
    expect(run.code, explain(run)).toBe(0)
    expect(run.stdout).toContain('the handler ran 1 time(s) in total')
  })

  it('koa-route.ts: one downstream run for a burst of 20 requests', async () => {
    const run = await runExample('koa-route.ts', { REDIS_URL: redis.url })
    expect(run.code, explain(run)).toBe(0)
    expect(run.stdout).toContain('20 simultaneous requests → X-Cache {"MISS":1,"HIT":19}; the handler ran 1 time(s)')
    expect(run.stdout).toMatch(
      /3 more requests → X-Cache HIT, HIT, HIT; Cache-Status example; hit; ttl=\d+; the handler ran 1 time\(s\) in total/,
    )
  })

  it('nestjs-route.ts: one handler run per burst on both platforms; a PUT with @InvalidateTags drops the entry', async () => {
    const run = await runExample('nestjs-route.ts', { REDIS_URL: redis.url, TSX_TSCONFIG_PATH: 'tsconfig.nestjs.json' })
    expect(run.code, explain(run)).toBe(0)
    for (const platform of ['express', 'fastify']) {
      expect(run.stdout).toContain(
        `${platform}: 20 simultaneous requests → X-Cache {"MISS":1,"HIT":19}; the handler ran 1 time(s)`,
      )
      expect(run.stdout).toContain(`after PUT → X-Cache MISS; the handler ran 2 time(s) in total`)
    }
  })

  for (const example of ['fastify-route.ts', 'hono-route.ts']) {
    it(`${example}: one handler run for a burst of 20 requests; X-Cache and Cache-Status printed`, async () => {
      const run = await runExample(example, { REDIS_URL: redis.url })
      expect(run.code, explain(run)).toBe(0)
      expect(run.stdout).toContain('"MISS (example; fwd=uri-miss; stored)":1')
      expect(run.stdout).toContain('the handler ran 1 time(s) in total')
    })
  }

  it('cluster-workers.ts: one loader run across 4 worker processes', async () => {
    const run = await runExample('cluster-workers.ts', { REDIS_URL: redis.url })
    expect(run.code, explain(run)).toBe(0)
    expect(run.stdout).toMatch(/40 getOrLoad calls in 4 processes → the loader ran 1 time\(s\)/)
  })

  it('express-metrics.ts: GET /metrics parses; coalesced requests count as served by the cache', async () => {
    const run = await runExample('express-metrics.ts', { REDIS_URL: redis.url })
    expect(run.code, explain(run)).toBe(0)
    // Typically 10 hits and 23 coalesced; a request slow to arrive may find the render done and hit instead.
    const match =
      /35 requests, 2 renders; GET \/metrics → (\d+) served by the cache \(([\d.]+) %: hits (\d+) L1 \+ 0 Redis, stale 0, coalesced (\d+)\), misses 2; loads 2/.exec(
        run.stdout,
      )
    expect(match, run.stdout).not.toBeNull()
    const [served, percent, hits, coalesced] = [match![1], match![2], match![3], match![4]].map(Number)
    expect(served).toBe(33)
    expect(hits! + coalesced!).toBe(33)
    expect(percent).toBe(94.3)
  })

  it('leader-scheduler.ts: ticks run by one leader at a time, terms increasing; config reloads never torn', async () => {
    const run = await runExample('leader-scheduler.ts', { REDIS_URL: redis.url })
    expect(run.code, explain(run)).toBe(0)
    expect(run.stdout).toMatch(/scheduler: 1\d ticks written by [2-9] leaders in turn \(.+\), terms increasing/)
    expect(run.stdout).toMatch(/config: 3 reloads under the write lock, \d+ reads under read locks, 0 torn reads/)
  })

  it.skipIf(postgresUnavailable !== undefined)('express-postgres.ts: cached GET, invalidated by PUT', async () => {
    const run = await runExample('express-postgres.ts', { REDIS_URL: redis.url, DATABASE_URL })
    expect(run.code, explain(run)).toBe(0)
    expect(run.stdout).toContain('SQL queries so far: 1')
    expect(run.stdout).toContain('price 1999 (fresh from the database); SQL queries so far: 2')
  })

  it.skipIf(postgresUnavailable !== undefined)('coupon-issue.ts: 50 users, 20 coupons, never oversold', async () => {
    const run = await runExample('coupon-issue.ts', { REDIS_URL: redis.url, DATABASE_URL })
    expect(run.code, explain(run)).toBe(0)
    expect(run.stdout).toContain('50 users, 20 coupons → issued 20, sold out for 30, fenced 0')
    expect(run.stdout).toContain('20 coupons issued, 0 left (never oversold)')
  })
})
