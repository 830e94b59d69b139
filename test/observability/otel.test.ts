/**
 * instrument(cache): what the real OpenTelemetry SDKs (in-memory exporters) receive from
 * a cache on a real redis-server, after scripted sequences whose every event is known.
 */
import type { Redis } from 'ioredis'
import { context, trace, SpanStatusCode } from '@opentelemetry/api'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import {
  createCache,
  InvalidArgumentError,
  LockWaitTimeoutError,
  RemoteLoaderError,
  type Cache,
  type CacheOptions,
} from '../../src/index.js'
import { instrument, type Instrumentation } from '../../src/observability/index.js'
import {
  attributesOf,
  countOf,
  enableContext,
  metricsHarness,
  pointOf,
  tracesHarness,
  valueOf,
  type MetricsHarness,
  type TracesHarness,
} from '../support/otel.js'
import { redisAvailable, startRedis, type RedisServer } from '../support/redis.js'
import { gate, sleep, until } from '../support/timing.js'
import { runScriptedSequence, SEQUENCE_CACHE_OPTIONS } from './scripted-sequence.js'

describe.skipIf(!redisAvailable)('instrument(cache) against a real redis-server', () => {
  let server: RedisServer
  let redis: Redis
  let metrics: MetricsHarness
  let traces: TracesHarness
  const caches: Cache[] = []
  const instrumentations: Instrumentation[] = []

  beforeAll(async () => {
    enableContext()
    server = await startRedis()
    redis = server.client()
  })
  afterAll(async () => {
    await server?.stop()
  })
  afterEach(async () => {
    for (const instrumentation of instrumentations.splice(0)) instrumentation.stop()
    await Promise.all(caches.splice(0).map((cache) => cache.close()))
    await Promise.all([metrics?.shutdown(), traces?.shutdown()])
    await redis.flushall()
  })

  function instrumented(options: Partial<CacheOptions> = {}, extra: Parameters<typeof instrument>[1] = {}): Cache {
    const cache = createCache({ redis, ttl: '30s', ...options })
    caches.push(cache)
    instrumentations.push(
      instrument(cache, {
        meter: metrics.provider.getMeter('test'),
        tracer: traces.provider.getTracer('test'),
        ...extra,
      }),
    )
    return cache
  }

  /** Script runs on the server since the last CONFIG RESETSTAT (INFO commandstats). */
  const scriptRuns = async () => {
    const info = await redis.info('commandstats')
    return [...info.matchAll(/^cmdstat_(?:evalsha|eval):calls=(\d+)/gm)].reduce(
      (sum, match) => sum + Number(match[1]),
      0,
    )
  }

  const fresh = () => {
    metrics = metricsHarness()
    traces = tracesHarness()
  }

  it('counts a scripted sequence exactly: 1 miss, 3 hits, 1 stale, 1 error', async () => {
    fresh()
    const cache = instrumented(SEQUENCE_CACHE_OPTIONS)
    const tracer = traces.provider.getTracer('app')
    // Each call inside a span of its own, as a request handler's would be.
    await runScriptedSequence(cache, (step, call) =>
      tracer.startActiveSpan(`request ${step}`, (span) => call().finally(() => span.end())),
    )

    const m = await metrics.collect()
    expect(valueOf(m, 'stampede_guard.cache.hits', { 'stampede_guard.tier': 'l1' })).toBe(3)
    expect(valueOf(m, 'stampede_guard.cache.hits', { 'stampede_guard.tier': 'redis' })).toBe(0)
    expect(valueOf(m, 'stampede_guard.cache.stale', { 'stampede_guard.stale.reason': 'grace' })).toBe(1)
    expect(valueOf(m, 'stampede_guard.cache.stale', { 'stampede_guard.stale.reason': 'fail-safe' })).toBe(0)
    expect(valueOf(m, 'stampede_guard.cache.misses')).toBe(2) // product:1, and the failing product:2
    expect(valueOf(m, 'stampede_guard.cache.leads')).toBe(3) // both misses and the background refresh won the lock
    expect(valueOf(m, 'stampede_guard.cache.loads', { 'stampede_guard.load.result': 'ok' })).toBe(2)
    expect(
      valueOf(m, 'stampede_guard.cache.loads', {
        'stampede_guard.load.result': 'error',
        'error.type': 'PriceServiceDown',
      }),
    ).toBe(1)
    expect(countOf(m, 'stampede_guard.cache.load.duration', { 'stampede_guard.load.result': 'ok' })).toBe(2)
    expect(countOf(m, 'stampede_guard.cache.load.duration', { 'stampede_guard.load.result': 'error' })).toBe(1)
    expect(m.get('stampede_guard.cache.load.duration')?.descriptor.unit).toBe('s')
    for (const name of [
      'coalesced',
      'waits',
      'fenced',
      'locks_lost',
      'redis_errors',
      'timeouts',
      'fail_safe',
      'corrupt',
      'uncacheable',
      'circuit.opens',
      'waits_capped',
      'tag_invalidations',
    ]) {
      const total = ((m.get(`stampede_guard.cache.${name}`)?.dataPoints ?? []) as { value: number }[]).reduce(
        (sum, point) => sum + point.value,
        0,
      )
      expect(total, name).toBe(0)
    }
    expect(valueOf(m, 'stampede_guard.cache.circuit.open')).toBe(0)
    // The counters agree with the cache's own stats().
    const stats = cache.stats()
    expect([stats.hit, stats.stale, stats.miss, stats.load]).toEqual([3, 1, 2, 3])

    // Keys are not attributes unless a keyLabel hook is given.
    for (const name of m.keys())
      for (const attributes of attributesOf(m, name)) expect(JSON.stringify(attributes)).not.toContain('product:')

    // Spans: one per load. Foreground loads are children of the caller's span; the background
    // refresh starts its own trace, linked to the request that triggered it.
    const spans = traces.spans()
    const byName = (name: string) => spans.filter((span) => span.name === name)
    const loadSpans = byName('stampede-guard load')
    expect(loadSpans).toHaveLength(3)
    const [missRequest] = byName('request miss')
    const [staleRequest] = byName('request stale')
    const [errorRequest] = byName('request error')
    const childOf = (parent: typeof missRequest) =>
      loadSpans.filter((span) => span.parentSpanContext?.spanId === parent!.spanContext().spanId)
    expect(childOf(missRequest)).toHaveLength(1)
    expect(childOf(missRequest)[0]!.spanContext().traceId).toBe(missRequest!.spanContext().traceId)
    const [errored] = childOf(errorRequest)
    expect(errored!.status.code).toBe(SpanStatusCode.ERROR)
    expect(errored!.attributes['error.type']).toBe('PriceServiceDown')
    expect(errored!.events.map((event) => event.name)).toContain('exception')
    const [refresh] = loadSpans.filter((span) => span.attributes['stampede_guard.load.background'] === true)
    expect(refresh!.parentSpanContext).toBeUndefined()
    expect(refresh!.links.map((link) => link.context.spanId)).toEqual([staleRequest!.spanContext().spanId])
    for (const span of spans) expect(JSON.stringify(span.attributes)).not.toContain('product:')
    expect(byName('stampede-guard wait')).toHaveLength(0) // no other process held a lock
  })

  it('makes spans the loader opens children of the load span', async () => {
    fresh()
    const cache = instrumented()
    const tracer = traces.provider.getTracer('app')
    await cache.getOrLoad('report', async () => {
      const query = tracer.startSpan('SELECT report')
      await sleep(1)
      query.end()
      return 42
    })
    const spans = traces.spans()
    const load = spans.find((span) => span.name === 'stampede-guard load')!
    const query = spans.find((span) => span.name === 'SELECT report')!
    expect(query.parentSpanContext?.spanId).toBe(load.spanContext().spanId)
  })

  /**
   * Another process (a second cache on the same Redis: separate lock, connections and L1)
   * loads `hot` with `leaderLoad`, held until the instrumented waiter is waiting for its
   * message; then the waiter's answer (or error) and the leader's are returned.
   */
  async function crossProcessWait(leaderLoad: () => Promise<string>, waiterOptions: Partial<CacheOptions> = {}) {
    const leader = createCache({ redis, ttl: '30s', lock: { lease: '30s' } }) // no renewal script runs during the test
    caches.push(leader)
    await redis.config('RESETSTAT')
    const waiter = instrumented(waiterOptions)
    const held = gate()
    const leading = leader
      .getOrLoad('hot', async () => {
        await held.promise
        return leaderLoad()
      })
      .catch((error: unknown) => error)
    await until(() => leader.stats().leader === 1, 'the leader to take the lock')
    const tracer = traces.provider.getTracer('app')
    const waiting = tracer
      .startActiveSpan('request waiter', (span) =>
        waiter.getOrLoadResult('hot', async () => 'not me').finally(() => span.end()),
      )
      .catch((error: unknown) => error)
    // Answer only once the waiter is waiting for the message: the leader's lookup, then the
    // waiter's lookup and its re-check after subscribing, are three script runs.
    await until(async () => (await scriptRuns()) >= 3, 'the waiter to re-check after subscribing')
    held.open()
    const answers = { leader: await leading, waiter: await waiting }
    const spans = traces.spans()
    const request = spans.find((span) => span.name === 'request waiter')!
    const waits = spans.filter((span) => span.name === 'stampede-guard wait')
    expect(waits).toHaveLength(1)
    expect(waits[0]!.parentSpanContext?.spanId).toBe(request.spanContext().spanId)
    return { ...answers, metrics: await metrics.collect(), waitSpan: waits[0]! }
  }

  it('reports a cross-process wait: the wait histogram, a wait span under the waiting caller, coalesced from remote', async () => {
    fresh()
    const { leader, waiter, metrics: m, waitSpan } = await crossProcessWait(async () => 'value')
    expect(leader).toBe('value')
    expect(waiter).toEqual({ value: 'value', outcome: 'coalesced' })
    expect(valueOf(m, 'stampede_guard.cache.waits')).toBe(1)
    expect(valueOf(m, 'stampede_guard.cache.coalesced', { 'stampede_guard.coalesced.from': 'remote' })).toBe(1)
    expect(countOf(m, 'stampede_guard.cache.wait.duration', { 'stampede_guard.wait.outcome': 'value' })).toBe(1)
    expect(valueOf(m, 'stampede_guard.cache.loads', { 'stampede_guard.load.result': 'ok' })).toBe(0) // the waiter loaded nothing
    expect(waitSpan.attributes['stampede_guard.wait.outcome']).toBe('value')
    expect(waitSpan.status.code).toBe(SpanStatusCode.UNSET)
  })

  it("reports a wait that ended with the other process's load failing", async () => {
    fresh()
    const {
      waiter,
      metrics: m,
      waitSpan,
    } = await crossProcessWait(async () => {
      throw new TypeError('upstream broke')
    })
    expect(waiter).toBeInstanceOf(RemoteLoaderError)
    expect(countOf(m, 'stampede_guard.cache.wait.duration', { 'stampede_guard.wait.outcome': 'error' })).toBe(1)
    expect(valueOf(m, 'stampede_guard.cache.coalesced', { 'stampede_guard.coalesced.from': 'remote' })).toBe(0)
    expect(waitSpan.status.code).toBe(SpanStatusCode.ERROR)
    expect(waitSpan.attributes['error.type']).toBe('error')
  })

  it('reports a wait that ran out of waitTimeout', async () => {
    fresh()
    const leader = createCache({ redis, ttl: '30s', lock: { lease: '30s' } })
    caches.push(leader)
    const held = gate()
    const leading = leader.getOrLoad('slow', async () => {
      await held.promise
      return 'late'
    })
    await until(() => leader.stats().leader === 1, 'the leader to take the lock')
    const waiter = instrumented({ waitTimeout: '200ms', onWaitTimeout: 'throw' })
    await expect(waiter.getOrLoad('slow', async () => 'not me')).rejects.toThrow(LockWaitTimeoutError)
    held.open()
    expect(await leading).toBe('late')
    const m = await metrics.collect()
    expect(countOf(m, 'stampede_guard.cache.wait.duration', { 'stampede_guard.wait.outcome': 'timeout' })).toBe(1)
    expect(valueOf(m, 'stampede_guard.cache.timeouts', { 'stampede_guard.timeout.kind': 'wait' })).toBe(1)
    expect(
      (
        pointOf(m, 'stampede_guard.cache.wait.duration', { 'stampede_guard.wait.outcome': 'timeout' })?.value as {
          sum: number
        }
      ).sum,
    ).toBeGreaterThanOrEqual(0.2)
  })

  it('counts callers that joined a flight in this process, and marks their spans', async () => {
    fresh()
    const cache = instrumented()
    const tracer = traces.provider.getTracer('app')
    const held = gate()
    let loads = 0
    const loader = async () => {
      loads++
      await held.promise
      return 'v'
    }
    const calls = Array.from({ length: 5 }, (_, i) =>
      tracer.startActiveSpan(`caller ${i}`, (span) => cache.getOrLoad('joined', loader).finally(() => span.end())),
    )
    held.open()
    await Promise.all(calls)
    expect(loads).toBe(1)
    const m = await metrics.collect()
    expect(valueOf(m, 'stampede_guard.cache.coalesced', { 'stampede_guard.coalesced.from': 'process' })).toBe(4)
    const marked = traces
      .spans()
      .filter(
        (span) =>
          span.name.startsWith('caller ') && span.events.some((event) => event.name === 'stampede-guard.coalesced'),
      )
    expect(marked).toHaveLength(4)
  })

  it('labels keys only through the opt-in hook, within its budget of distinct labels', async () => {
    fresh()
    const cache = instrumented({}, { keyLabel: (key) => key.split(':')[0], maxKeyLabels: 2 })
    await cache.ready() // set up (invalidation bus confirmed), so the last call below is an L1 hit
    for (const key of ['user:1', 'user:2', 'order:1', 'cart:1', 'wish:1']) await cache.getOrLoad(key, async () => key)
    await cache.getOrLoad('user:1', async () => 'again') // an L1 hit
    const m = await metrics.collect()
    expect(valueOf(m, 'stampede_guard.cache.misses', { 'stampede_guard.key.label': 'user' })).toBe(2)
    expect(valueOf(m, 'stampede_guard.cache.misses', { 'stampede_guard.key.label': 'order' })).toBe(1)
    expect(valueOf(m, 'stampede_guard.cache.misses', { 'stampede_guard.key.label': '_OTHER' })).toBe(2) // cart and wish: past the budget of 2
    expect(
      valueOf(m, 'stampede_guard.cache.hits', { 'stampede_guard.tier': 'l1', 'stampede_guard.key.label': 'user' }),
    ).toBe(1)
    const labels = new Set(
      attributesOf(m, 'stampede_guard.cache.misses').map((attributes) => attributes['stampede_guard.key.label']),
    )
    expect([...labels].sort()).toEqual(['_OTHER', 'order', 'user'])
    const loadLabels = traces
      .spans()
      .filter((span) => span.name === 'stampede-guard load')
      .map((span) => span.attributes['stampede_guard.key.label'])
    expect(loadLabels).toEqual(['user', 'user', 'order', '_OTHER', '_OTHER'])
  })

  it('reports Redis errors and the circuit state', async () => {
    fresh()
    const doomed = await startRedis()
    const client = doomed.client({ maxRetriesPerRequest: 0 })
    client.on('error', () => {})
    await client.ping()
    const cache = createCache({
      redis: client,
      ttl: '30s',
      redisTimeout: 200,
      circuitBreaker: { threshold: 1, openFor: '1h' },
    })
    caches.push(cache)
    instrumentations.push(instrument(cache, { meter: metrics.provider.getMeter('test'), tracer: false }))
    await cache.ready() // the server clock is known, so a lookup starts with the fresh-copy GET
    await doomed.kill()
    expect(await cache.getOrLoad('k', async () => 'from the loader')).toBe('from the loader') // Redis down: still answered
    const m = await metrics.collect()
    expect(valueOf(m, 'stampede_guard.cache.redis_errors', { 'stampede_guard.redis.operation': 'get' })).toBe(1) // then the breaker skips Redis (no getOrLock)
    expect(valueOf(m, 'stampede_guard.cache.redis_errors', { 'stampede_guard.redis.operation': 'getOrLock' })).toBe(0)
    expect(valueOf(m, 'stampede_guard.cache.circuit.opens')).toBe(1)
    expect(valueOf(m, 'stampede_guard.cache.circuit.open')).toBe(1)
    await doomed.stop() // disconnects its client, which would otherwise keep reconnecting
  })

  it('stop() detaches: no more counts, no load scope; the cache can be instrumented again', async () => {
    fresh()
    const cache = instrumented()
    await cache.getOrLoad('a', async () => 1)
    instrumentations.pop()!.stop()
    await cache.getOrLoad('b', async () => 2)
    const m = await metrics.collect()
    expect(m.get('stampede_guard.cache.misses')?.dataPoints ?? []).toHaveLength(0) // its observable series are gone
    expect(traces.spans().filter((span) => span.name === 'stampede-guard load')).toHaveLength(1)
    instrumentations.push(instrument(cache, { meter: metrics.provider.getMeter('again'), tracer: false }))
  })

  it('rejects bad input with a typed error', () => {
    fresh()
    const cache = instrumented()
    const meter = metrics.provider.getMeter('test')
    const attempt = (run: () => unknown) => {
      try {
        run()
      } catch (error) {
        return error as InvalidArgumentError
      }
      throw new Error('expected a throw')
    }
    expect(attempt(() => instrument(cache)).argument).toBe('cache') // already instrumented
    const other = createCache({ ttl: '1s' })
    caches.push(other)
    expect(attempt(() => instrument(other, { meter })).argument).toBe('name') // same meter, no distinct name
    expect(attempt(() => instrument(other, { meter: {} as never })).argument).toBe('meter')
    expect(attempt(() => instrument(other, { tracer: 1 as never, meter: false })).argument).toBe('tracer')
    expect(attempt(() => instrument(other, { keyLabel: 'user' as never, meter: false })).argument).toBe('keyLabel')
    expect(attempt(() => instrument(other, { maxKeyLabels: 0, meter: false })).argument).toBe('maxKeyLabels')
    expect(attempt(() => instrument({} as never)).argument).toBe('cache')
    for (const error of [attempt(() => instrument(other, { meter }))])
      expect(error).toBeInstanceOf(InvalidArgumentError)
    instrumentations.push(instrument(other, { meter, name: 'second', tracer: false })) // a distinct name is fine
    expect(context.active()).toBeDefined()
    expect(trace.getActiveSpan()).toBeUndefined()
  })
})

describe('instrument(cache) with the global providers', () => {
  it('instruments any number of unnamed caches while no MeterProvider is registered (the no-op meter gets nothing attached)', async () => {
    const caches = [createCache({ ttl: '30s' }), createCache({ ttl: '30s' })]
    const instrumentations = caches.map((cache) => instrument(cache, { tracer: false })) // no name needed: nothing is reported
    expect(await caches[1]!.getOrLoad('k', async () => 1)).toBe(1)
    for (const instrumentation of instrumentations) instrumentation.stop()
    await Promise.all(caches.map((cache) => cache.close()))
  })
})

describe('instrument(cache) in in-process mode', () => {
  it('counts misses, hits and loads without Redis', async () => {
    const metrics = metricsHarness()
    const cache = createCache({ ttl: '30s' })
    const instrumentation = instrument(cache, { meter: metrics.provider.getMeter('test'), tracer: false })
    await cache.getOrLoad('k', async () => 1)
    await cache.getOrLoad('k', async () => 2)
    const m = await metrics.collect()
    expect(valueOf(m, 'stampede_guard.cache.misses')).toBe(1)
    expect(valueOf(m, 'stampede_guard.cache.hits', { 'stampede_guard.tier': 'l1' })).toBe(1)
    expect(valueOf(m, 'stampede_guard.cache.loads', { 'stampede_guard.load.result': 'ok' })).toBe(1)
    instrumentation.stop()
    await cache.close()
    await metrics.shutdown()
  })
})
