/**
 * What one scrape of a /metrics endpoint says about stampede-guard caches: hits by tier,
 * stale, coalesced, misses, loads, and the hit ratio, per cache name (the
 * `stampede_guard_cache_name` label; '' when the cache was instrumented without one).
 */
import { CACHE_COUNTERS, LOADS } from '../../src/observability/cache.js'
import { parsePrometheusText, type MetricFamily } from './prometheus-text.js'

export interface CacheCounts {
  l1Hits: number
  redisHits: number
  stale: number
  coalesced: number
  misses: number
  loads: number
  failedLoads: number
}

const ZERO: CacheCounts = { l1Hits: 0, redisHits: 0, stale: 0, coalesced: 0, misses: 0, loads: 0, failedLoads: 0 }

/** An OpenTelemetry counter's name as the Prometheus exporter writes it. */
export const prometheusCounterName = (otelName: string) => `${otelName.replaceAll('.', '_')}_total`

const FAMILY = {
  hits: prometheusCounterName(CACHE_COUNTERS.hit!.name),
  stale: prometheusCounterName(CACHE_COUNTERS.stale!.name),
  coalesced: prometheusCounterName(CACHE_COUNTERS.coalesced!.name),
  misses: prometheusCounterName(CACHE_COUNTERS.miss!.name),
  loads: prometheusCounterName(LOADS),
}

/** Counts per cache name, summed over every other label (key labels, stale reasons, …). */
export function cacheCountsFromScrape(text: string): Map<string, CacheCounts> {
  const families = parsePrometheusText(text)
  const byCache = new Map<string, CacheCounts>()
  const add = (
    family: MetricFamily | undefined,
    field: (labels: Record<string, string>) => keyof CacheCounts | undefined,
  ) => {
    for (const sample of family?.samples ?? []) {
      const target = field(sample.labels)
      if (!target) continue
      const name = sample.labels.stampede_guard_cache_name ?? ''
      const counts = byCache.get(name) ?? { ...ZERO }
      counts[target] += sample.value
      byCache.set(name, counts)
    }
  }
  add(families.get(FAMILY.hits), (labels) => (labels.stampede_guard_tier === 'l1' ? 'l1Hits' : 'redisHits'))
  add(families.get(FAMILY.stale), () => 'stale')
  add(families.get(FAMILY.coalesced), () => 'coalesced')
  add(families.get(FAMILY.misses), () => 'misses')
  add(families.get(FAMILY.loads), () => 'loads')
  add(families.get(FAMILY.loads), (labels) =>
    labels.stampede_guard_load_result === 'error' ? 'failedLoads' : undefined,
  )
  return byCache
}

/** Fetches and parses one scrape; bounded, so a hung endpoint cannot hang the caller. */
export async function scrapeCacheCounts(url: string, timeoutMs = 5_000): Promise<Map<string, CacheCounts>> {
  const response = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) })
  if (!response.ok) throw new Error(`GET ${url} answered ${response.status}`)
  return cacheCountsFromScrape(await response.text())
}

/** `later − earlier`, field by field: the counts of one interval between two scrapes. */
export function countsBetween(earlier: CacheCounts | undefined, later: CacheCounts): CacheCounts {
  const out = { ...later }
  for (const field of Object.keys(out) as (keyof CacheCounts)[]) out[field] -= earlier?.[field] ?? 0
  return out
}

/**
 * Share of lookups answered from the cache, fresh or stale, without waiting for a load:
 * (hits + stale) / (hits + stale + coalesced + misses). Undefined before any lookup.
 */
export function hitRatio(counts: CacheCounts): number | undefined {
  const answered = counts.l1Hits + counts.redisHits + counts.stale
  const total = answered + counts.coalesced + counts.misses
  return total === 0 ? undefined : answered / total
}

export function describeCounts(counts: CacheCounts): string {
  const ratio = hitRatio(counts)
  const percent = ratio === undefined ? 'n/a' : `${(ratio * 100).toFixed(1)} %`
  return (
    `hit ratio ${percent} (hits ${counts.l1Hits} L1 + ${counts.redisHits} Redis, stale ${counts.stale}, coalesced ` +
    `${counts.coalesced}, misses ${counts.misses}; loads ${counts.loads}, ${counts.failedLoads} failed)`
  )
}
