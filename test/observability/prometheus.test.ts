/**
 * The Prometheus /metrics endpoint: an instrumented cache on a real redis-server, the
 * OpenTelemetry Prometheus exporter served over real HTTP, scraped and parsed strictly.
 */
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { PrometheusExporter } from '@opentelemetry/exporter-prometheus'
import { MeterProvider } from '@opentelemetry/sdk-metrics'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { cacheCountsFromScrape, hitRatio } from '../../load/metrics/cache-summary.js'
import { ExpositionError, parsePrometheusText } from '../../load/metrics/prometheus-text.js'
import { createCache } from '../../src/index.js'
import { instrument } from '../../src/observability/index.js'
import { redisAvailable, startRedis, type RedisServer } from '../support/redis.js'
import { runScriptedSequence, SEQUENCE_CACHE_OPTIONS } from './scripted-sequence.js'

describe('the strict exposition parser', () => {
  it('reads families, labels with escapes, histograms and special values', () => {
    const families = parsePrometheusText(
      [
        '# HELP a_total Things, "quoted" \\\\ and a\\nnewline',
        '# TYPE a_total counter',
        'a_total{x="1",y="say \\"hi\\"\\n"} 3',
        'a_total{x="2"} 4.5e1 1700000000000',
        '# TYPE h histogram',
        'h_bucket{le="0.1"} 1',
        'h_bucket{le="+Inf"} 2',
        'h_sum 0.3',
        'h_count 2',
        '# TYPE g gauge',
        'g NaN',
      ].join('\n') + '\n',
    )
    expect(families.get('a_total')?.samples).toEqual([
      { name: 'a_total', labels: { x: '1', y: 'say "hi"\n' }, value: 3 },
      { name: 'a_total', labels: { x: '2' }, value: 45 },
    ])
    expect(families.get('a_total')?.help).toBe('Things, "quoted" \\ and a\nnewline')
    expect(families.get('h')?.samples.map((sample) => sample.value)).toEqual([1, 2, 0.3, 2])
    expect(families.get('h')?.samples[1]?.labels.le).toBe('+Inf')
    expect(families.get('g')?.samples[0]?.value).toBeNaN()
  })

  it('throws on what a Prometheus server would reject', () => {
    for (const bad of [
      'x 1', // no # TYPE
      '# TYPE x counter\nx{a=1} 1', // unquoted label value
      '# TYPE x counter\nx{a="1"} one', // not a number
      '# TYPE x counter\nx{a="1",a="2"} 1', // repeated label
      '# TYPE x counter\nx 1\n# TYPE x counter', // TYPE after samples
      '# TYPE x histogram\nx_bucket 1', // bucket without le
      '# TYPE x counter\nx{a="\\q"} 1', // bad escape
      '# TYPE x widget', // unknown type
    ]) {
      expect(() => parsePrometheusText(bad), bad).toThrow(ExpositionError)
    }
  })
})

describe.skipIf(!redisAvailable)('GET /metrics through @opentelemetry/exporter-prometheus', () => {
  let redis: RedisServer
  beforeAll(async () => {
    redis = await startRedis()
  })
  afterAll(async () => {
    await redis?.stop()
  })

  it('serves a scrape that parses, with the scripted sequence counted and the hit ratio derivable', async () => {
    const exporter = new PrometheusExporter({ preventServerStart: true })
    const provider = new MeterProvider({ readers: [exporter] })
    const cache = createCache({ redis: redis.client(), ...SEQUENCE_CACHE_OPTIONS })
    const instrumentation = instrument(cache, {
      meter: provider.getMeter('stampede-guard'),
      tracer: false,
      name: 'catalog',
    })
    const server = http.createServer((req, res) => exporter.getMetricsRequestHandler(req, res))
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    try {
      await runScriptedSequence(cache)
      const response = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/metrics`)
      expect(response.status).toBe(200)
      expect(response.headers.get('content-type')).toMatch(/^text\/plain/)
      const text = await response.text()
      const families = parsePrometheusText(text) // throws on any malformed line

      const sample = (family: string, labels: Record<string, string> = {}) => {
        const matching =
          families.get(family)?.samples.filter((s) => Object.entries(labels).every(([k, v]) => s.labels[k] === v)) ?? []
        expect(matching, `${family} ${JSON.stringify(labels)}`).toHaveLength(1)
        return matching[0]!
      }
      expect(families.get('stampede_guard_cache_hits_total')?.type).toBe('counter')
      expect(sample('stampede_guard_cache_hits_total', { stampede_guard_tier: 'l1' }).value).toBe(3)
      expect(
        sample('stampede_guard_cache_hits_total', { stampede_guard_tier: 'l1' }).labels.stampede_guard_cache_name,
      ).toBe('catalog')
      expect(sample('stampede_guard_cache_stale_total', { stampede_guard_stale_reason: 'grace' }).value).toBe(1)
      expect(sample('stampede_guard_cache_misses_total').value).toBe(2)
      expect(sample('stampede_guard_cache_loads_total', { stampede_guard_load_result: 'ok' }).value).toBe(2)
      expect(
        sample('stampede_guard_cache_loads_total', {
          stampede_guard_load_result: 'error',
          error_type: 'PriceServiceDown',
        }).value,
      ).toBe(1)
      expect(families.get('stampede_guard_cache_circuit_open')?.type).toBe('gauge')
      // Counters of events the sequence does not cause are listed, at 0, before their first event.
      expect(sample('stampede_guard_cache_waits_capped_total').value).toBe(0)
      for (const from of ['process', 'remote'])
        expect(
          sample('stampede_guard_cache_tag_invalidations_total', { stampede_guard_tag_invalidation_from: from }).value,
        ).toBe(0)

      // The load histogram: cumulative buckets, +Inf equal to the count.
      const histogram = families.get('stampede_guard_cache_load_duration')
      expect(histogram?.type).toBe('histogram')
      expect(histogram?.unit).toBe('s')
      const okBuckets = histogram!.samples.filter(
        (s) => s.name.endsWith('_bucket') && s.labels.stampede_guard_load_result === 'ok',
      )
      expect(okBuckets.map((s) => s.value)).toEqual([...okBuckets.map((s) => s.value)].sort((a, b) => a - b))
      expect(okBuckets.at(-1)).toMatchObject({ labels: { le: '+Inf' }, value: 2 })
      const okCount = histogram!.samples.filter(
        (s) => s.name === 'stampede_guard_cache_load_duration_count' && s.labels.stampede_guard_load_result === 'ok',
      )
      expect(okCount.map((s) => s.value)).toEqual([2])

      // The load tool's summary of the same scrape.
      const counts = cacheCountsFromScrape(text).get('catalog')!
      expect(counts).toEqual({ l1Hits: 3, redisHits: 0, stale: 1, coalesced: 0, misses: 2, loads: 3, failedLoads: 1 })
      expect(hitRatio(counts)).toBeCloseTo(4 / 6)
      expect(text).not.toContain('product:')
    } finally {
      server.close()
      instrumentation.stop()
      await cache.close()
      await provider.shutdown()
    }
  })
})
