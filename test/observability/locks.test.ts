/**
 * instrumentLocks(createLocks(…)): what the real OpenTelemetry SDKs (in-memory metric
 * reader and span exporter) receive from a real lock front, on a real redis-server and on
 * the machine's PostgreSQL, after scripted sequences whose every event is known. Counts
 * are asserted, not timings (a wait's lower bound at most).
 */
import type { Pool, PoolClient } from 'pg'
import { SpanStatusCode, trace } from '@opentelemetry/api'
import { afterEach, describe, expect, it } from 'vitest'
import {
  createLocks,
  InvalidArgumentError,
  LockBackendError,
  LockBusyError,
  LockLostError,
  RedisUnavailableError,
  type Locks,
} from '../../src/index.js'
import { instrumentLocks, type Instrumentation } from '../../src/observability/index.js'
import {
  countOf,
  enableContext,
  metricsHarness,
  pointOf,
  tracesHarness,
  valueOf,
  type MetricsHarness,
  type TracesHarness,
} from '../support/otel.js'
import { createPostgresDatabase, postgresAvailable, type TestDatabase } from '../support/databases.js'
import { redisAvailable, startRedis, type RedisServer } from '../support/redis.js'
import { abortReason, until } from '../support/timing.js'

const ACQUIRES = 'stampede_guard.lock.acquires'
const LOST = 'stampede_guard.lock.lost'
const ERRORS = 'stampede_guard.lock.backend_errors'
const WAIT = 'stampede_guard.lock.wait.duration'
const HOLD = 'stampede_guard.lock.hold.duration'
const ACQUIRE_SPAN = 'stampede-guard lock acquire'
const HOLD_SPAN = 'stampede-guard lock hold'
const result = (value: string) => ({ 'stampede_guard.lock.result': value })
const end = (value: string) => ({ 'stampede_guard.lock.end': value })

describe('instrumentLocks() on a real lock front', () => {
  let metrics: MetricsHarness | undefined
  let traces: TracesHarness | undefined
  let instrumentation: Instrumentation | undefined
  const cleanups: (() => Promise<unknown>)[] = []
  afterEach(async () => {
    instrumentation?.stop()
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => {})
    await Promise.all([metrics?.shutdown(), traces?.shutdown()])
    instrumentation = metrics = traces = undefined
  })

  /** Instruments `locks` into fresh in-memory SDKs. */
  function observe<R>(locks: Locks<R>): { metrics: MetricsHarness; traces: TracesHarness } {
    enableContext()
    metrics = metricsHarness()
    traces = tracesHarness()
    instrumentation = instrumentLocks(locks, {
      meter: metrics.provider.getMeter('test'),
      tracer: traces.provider.getTracer('test'),
      keyLabel: (key) => key.split(':')[0]!,
    })
    return { metrics, traces }
  }

  it.skipIf(!redisAvailable)(
    'Redis: acquired, busy (tryAcquire and a wait that ran out), released, lost (lock key deleted) and a backend error, as metrics and spans',
    async () => {
      const server: RedisServer = await startRedis()
      cleanups.push(() => server.stop())
      const redis = server.client({ maxRetriesPerRequest: 1 })
      cleanups.push(async () => redis.disconnect())
      const locks = createLocks({ redis, namespace: 'otel', commandTimeout: 500 })
      cleanups.push(() => locks.close())
      const { metrics, traces } = observe(locks)
      const app = () => traces.provider.getTracer('app')

      // 1 acquired + 1 released, inside a request's span.
      await app().startActiveSpan('job', async (span) => {
        await locks.withLock('order:1', () => 'done')
        span.end()
      })
      // 1 acquired; 2 busy while it is held; then 1 released.
      const holder = await locks.acquire('order:2')
      expect(await locks.tryAcquire('order:2')).toBeUndefined()
      await expect(locks.acquire('order:2', { wait: 100 })).rejects.toBeInstanceOf(LockBusyError)
      await holder.release()
      await holder.release() // idempotent: no second release is counted
      // 1 acquired, then lost: its key is deleted, so the watchdog's next renewal (lease/3) finds it gone.
      let lostHolder!: Awaited<ReturnType<typeof locks.acquire>>
      await app().startActiveSpan('job-lost', async (span) => {
        lostHolder = await locks.acquire('order:3', { lease: 300 })
        span.end()
      })
      expect(await redis.del('otel:{l:order:3}:lock')).toBe(1)
      expect(await abortReason(lostHolder.signal, 'the watchdog to find the lock gone')).toBeInstanceOf(LockLostError)
      await lostHolder.release() // after a loss: not counted as released
      // 1 backend error: Redis is gone when the next acquire starts.
      await server.kill()
      await expect(locks.acquire('order:4')).rejects.toBeInstanceOf(RedisUnavailableError)

      const m = await metrics.collect()
      const redisBackend = { 'stampede_guard.lock.backend': 'redis' }
      expect(valueOf(m, ACQUIRES, { ...redisBackend, ...result('acquired') })).toBe(3)
      expect(valueOf(m, ACQUIRES, { ...redisBackend, ...result('busy') })).toBe(2)
      expect(countOf(m, WAIT, { ...redisBackend, ...result('acquired') })).toBe(3)
      expect(countOf(m, WAIT, { ...redisBackend, ...result('busy') })).toBe(2)
      // The wait that ran out waited at least most of its 100 ms (a lower bound only).
      expect((pointOf(m, WAIT, result('busy'))?.value as { sum: number }).sum).toBeGreaterThanOrEqual(0.09)
      expect(countOf(m, HOLD, { ...redisBackend, ...end('released') })).toBe(2)
      expect(countOf(m, HOLD, { ...redisBackend, ...end('lost') })).toBe(1)
      expect(valueOf(m, LOST, redisBackend)).toBe(1)
      expect(valueOf(m, ERRORS, { ...redisBackend, 'stampede_guard.lock.operation': 'acquire' })).toBe(1)
      expect(pointOf(m, LOST, redisBackend)?.attributes['stampede_guard.key.label']).toBe('order')

      const spans = traces.spans()
      const acquire = spans.filter((span) => span.name === ACQUIRE_SPAN)
      const hold = spans.filter((span) => span.name === HOLD_SPAN)
      expect(acquire).toHaveLength(5)
      expect(hold).toHaveLength(3)
      const job = spans.find((span) => span.name === 'job')!
      const jobLost = spans.find((span) => span.name === 'job-lost')!
      const childrenOf = (parent: typeof job) =>
        spans.filter((span) => span.parentSpanContext?.spanId === parent.spanContext().spanId).map((span) => span.name)
      expect(childrenOf(job).sort()).toEqual([ACQUIRE_SPAN, HOLD_SPAN]) // withLock's acquire and hold, in the caller's context
      // The loss was found by a watchdog timer, which runs in the context of the acquire that armed it.
      expect(childrenOf(jobLost).sort()).toEqual([ACQUIRE_SPAN, HOLD_SPAN])
      expect(
        acquire
          .filter((span) => span.status.code === SpanStatusCode.ERROR)
          .map((span) => span.attributes['error.type']),
      ).toEqual(['busy', 'busy'])
      expect(
        hold.filter((span) => span.status.code === SpanStatusCode.ERROR).map((span) => span.attributes['error.type']),
      ).toEqual(['lost'])
      for (const span of spans) expect(JSON.stringify(span.attributes)).not.toMatch(/order:\d/)
      expect(trace.getActiveSpan()).toBeUndefined()

      // stop() detaches: the front keeps working and nothing more is reported.
      instrumentation!.stop()
      instrumentation = undefined
      await server.restart()
      await until(() => redis.status === 'ready', 'the client to reconnect')
      await locks.withLock('order:5', () => {})
      const after = await metrics.collect()
      expect(valueOf(after, ACQUIRES, { ...redisBackend, ...result('acquired') })).toBe(3)
      expect(traces.spans()).toHaveLength(spans.length)
    },
  )

  it.skipIf(!postgresAvailable)(
    "PostgreSQL: acquired, busy, released, and lost when the holder's connection is terminated (its release then fails: a backend error)",
    async () => {
      const db: TestDatabase = await createPostgresDatabase('otel_locks')
      cleanups.push(() => db.drop())
      const pool: Pool = await db.pool({ max: 6 })
      const admin: Pool = await db.pool({ max: 1 })
      const locks = createLocks<PoolClient>({ postgres: pool })
      cleanups.push(() => locks.close())
      const { metrics, traces } = observe(locks)

      await locks.withLock('invoice:1', async ({ resource }) => {
        await resource.query('SELECT 1')
      })
      const holder = await locks.acquire('invoice:2')
      expect(await locks.tryAcquire('invoice:2')).toBeUndefined()
      const heldBy = await admin.query<{ pid: number }>(
        "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
      )
      expect(heldBy.rows).toHaveLength(1)
      await admin.query('SELECT pg_terminate_backend($1)', [heldBy.rows[0]!.pid])
      expect(await abortReason(holder.signal, 'the backend to report the terminated connection')).toBeInstanceOf(
        LockLostError,
      )
      // Transaction mode: its transaction is gone, so the release says nothing was kept.
      await expect(holder.release()).rejects.toBeInstanceOf(LockBackendError)
      const next = await locks.acquire('invoice:2', { wait: '10s' })
      await next.release()

      const m = await metrics.collect()
      const postgres = { 'stampede_guard.lock.backend': 'postgres' }
      expect(valueOf(m, ACQUIRES, { ...postgres, ...result('acquired') })).toBe(3)
      expect(valueOf(m, ACQUIRES, { ...postgres, ...result('busy') })).toBe(1)
      expect(countOf(m, WAIT, { ...postgres, ...result('acquired') })).toBe(3)
      expect(countOf(m, HOLD, { ...postgres, ...end('released') })).toBe(2)
      expect(countOf(m, HOLD, { ...postgres, ...end('lost') })).toBe(1)
      expect(valueOf(m, LOST, postgres)).toBe(1)
      expect(valueOf(m, ERRORS, { ...postgres, 'stampede_guard.lock.operation': 'release' })).toBe(1)
      expect(valueOf(m, ERRORS, { ...postgres, 'stampede_guard.lock.operation': 'acquire' })).toBe(0)

      const spans = traces.spans()
      expect(spans.filter((span) => span.name === ACQUIRE_SPAN)).toHaveLength(4)
      const hold = spans.filter((span) => span.name === HOLD_SPAN)
      expect(hold.map((span) => span.attributes['stampede_guard.lock.end']).sort()).toEqual([
        'lost',
        'released',
        'released',
      ])
      for (const span of spans) expect(span.attributes['stampede_guard.lock.backend']).toBe('postgres')
    },
  )

  it('rejects a source without on()', () => {
    expect(() => instrumentLocks({} as never, { meter: false, tracer: false })).toThrow(InvalidArgumentError)
  })
})
