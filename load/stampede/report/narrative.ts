/**
 * Plain-language reading of a scenario's results for the demo: what the numbers in the
 * table mean, computed from the numbers themselves (nothing here is canned: if a run
 * comes out differently, the sentences say so).
 */
import type { ModeName } from '../modes.js'
import type { ModeResult, ScenarioResult } from '../results.js'
import { factor, int, ms } from '../../shared/format.js'

function byMode(scenario: ScenarioResult): Partial<Record<ModeName, ModeResult>> {
  return Object.fromEntries(scenario.modes.map((m) => [m.mode, m]))
}

/** Queries in the first 300 ms: the size of the initial burst. */
const firstBurst = (r: ModeResult) => r.queriesPer100ms.slice(0, 3).reduce((a, b) => a + b, 0)

const plural = (n: number, word: 'query' | 'request') =>
  `${int(n)} ${Math.round(n) === 1 ? word : word === 'query' ? 'queries' : 'requests'}`

export function explainResults(
  scenario: ScenarioResult,
  context: { workers: number; sharedRedis: boolean; dbLatencyMs: number },
): string[] {
  const { none, naive, lock, full } = byMode(scenario)
  const seconds = (scenario.durationMs / 1000).toFixed(1)
  const lines: string[] = []
  if (none) {
    lines.push(
      `none:  without a cache every request is a query: ${plural(none.dbQueries, 'query')} in ${seconds} s ` +
        `(peak ${int(none.peakQueriesPerSec)}/s). That is the load the cache has to take off the database.`,
    )
  }

  if (scenario.name === 'cold') {
    if (naive) {
      lines.push(
        `naive: ${plural(naive.dbQueries, 'query')}, and ${int(firstBurst(naive))} of them in the first 300 ms: ` +
          `every request that arrived before the first load finished missed and queried the database too. ` +
          `That burst is a cache stampede.`,
      )
    }
    if (lock) {
      lines.push(
        context.sharedRedis && lock.dbQueries !== 1
          ? `lock:  ${plural(lock.dbQueries, 'query')} for ${int(lock.traffic.requests)} requests across ${context.workers} processes: ` +
              `more than the one load the lock allows per miss, so some requests found no stored value (see the chart for when).`
          : context.sharedRedis
            ? `lock:  ${plural(lock.dbQueries, 'query')} for ${int(lock.traffic.requests)} requests across ${context.workers} processes: ` +
              `one request won the Redis lock and loaded; the others waited and were woken over Redis pub/sub the moment the value was stored.`
            : `lock:  ${plural(lock.dbQueries, 'query')}: without Redis each of the ${context.workers} processes elects its own loader ` +
              `(in-process single-flight), so up to one query per process. With Redis it is exactly one across all of them.`,
      )
    }
    if (full) {
      const same = lock?.dbQueries === full.dbQueries ? ' as well' : ''
      // Only what this run measured: req/s is compared, not explained by a mechanism it did not isolate.
      const rates = lock
        ? `, at ${int(full.traffic.reqPerSec)} req/s against lock's ${int(lock.traffic.reqPerSec)}`
        : ''
      lines.push(`full:  ${plural(full.dbQueries, 'query')}${same}${rates}.`)
    }
  }

  if (scenario.name === 'expiry') {
    const windows = Math.max(1, Math.round(scenario.durationMs / 1000))
    if (naive) {
      lines.push(
        `naive: ${plural(naive.dbQueries, 'query')}, about ${int(naive.dbQueries / windows)} each time the key expired ` +
          `(the spikes in the chart): one per request in flight at that moment.`,
      )
    }
    if (lock) {
      const perExpiry = context.sharedRedis
        ? lock.dbQueries <= windows + 1
          ? 'one reload per expiry, whatever the traffic'
          : `${(lock.dbQueries / windows).toFixed(1)} reloads per expiry on average`
        : `one reload per expiry in each of the ${context.workers} processes (without Redis they share nothing)`
      lines.push(
        `lock:  ${plural(lock.dbQueries, 'query')} in ${windows} TTL windows: ${perExpiry}. ` +
          `But requests that arrive during a reload wait for it (p99 ${ms(lock.traffic.latencyMs.p99)} ms).`,
      )
    }
    if (full) {
      const p99 = full.traffic.latencyMs.p99
      const waited =
        p99 < context.dbLatencyMs
          ? `so no request waited on the database: p99 ${ms(p99)} ms, below one query's ${context.dbLatencyMs} ms`
          : `yet p99 was ${ms(p99)} ms, above one query's ${context.dbLatencyMs} ms: some requests still waited, ` +
            `against lock's p99 ${lock ? ms(lock.traffic.latencyMs.p99) : '?'} ms`
      const extra =
        lock && full.dbQueries > lock.dbQueries
          ? ` ${int(full.dbQueries - lock.dbQueries)} more queries than lock: the price of refreshing early.`
          : ''
      lines.push(
        `full:  ${plural(full.dbQueries, 'query')}: early refresh reloads the key shortly before it expires, and stale-while-revalidate ` +
          `covers the moment of the reload, ${waited}.${extra}`,
      )
    }
  }

  if (lock && none) {
    const best = [lock, full]
      .filter((r): r is ModeResult => r !== undefined)
      .sort((a, b) => a.dbQueries - b.dbQueries)[0]!
    lines.push(
      `In short: ${best.mode} sent the database ${factor(best.reductionVsNone)} fewer queries than no cache` +
        (naive ? ` and ${factor(naive.dbQueries / Math.max(1, best.dbQueries))} fewer than the naive cache.` : '.'),
    )
  }
  return lines
}
