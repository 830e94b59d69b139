/**
 * What the route calls to get an item, for each mode. This is the only place where the
 * modes differ inside the app: `none` goes straight to the database, `naive` through the
 * baseline cache, `lock` and `full` through stampede-guard with the options of the mode.
 */
import type { Redis } from 'ioredis'
import { NaiveCache } from '../naive-cache.js'
import { SpinLockCache } from '../../wakeup/spin-lock-cache.js'
import type { Item } from '../db/source.js'
import { isModeName } from '../modes.js'
import type { MissProbe } from './miss-probe.js'
import type { RunConfig } from './protocol.js'

export interface ItemLoader {
  get(id: number): Promise<Item>
  /** Cache counters (stampede-guard's stats(); empty for none/naive). Summed over workers by the primary. */
  stats(): Record<string, number>
  close(): Promise<void>
}

export interface ItemLoaderDeps {
  /** One database query, counted. */
  queryDatabase: (id: number) => Promise<Item>
  /** Client for stampede-guard; undefined = in-process mode. */
  redis: Redis | undefined
  /** Client for the naive baseline (fails fast when Redis is down, as a hand-written cache would). */
  naiveRedis: () => Redis
  /** Told when a wait on another process's load ends with its value (the wake-up phase). */
  probe?: MissProbe
}

export async function createItemLoader(run: RunConfig, deps: ItemLoaderDeps): Promise<ItemLoader> {
  const { queryDatabase } = deps
  const mode = run.mode
  if (!isModeName(mode)) throw new Error(`unknown load-test mode '${mode}'`)
  switch (mode) {
    case 'none':
      return { get: queryDatabase, stats: () => ({}), close: async () => {} }

    case 'naive': {
      const naive = new NaiveCache(deps.naiveRedis(), run.namespace, run.cache.ttl)
      return {
        get: (id) => naive.getOrLoad(String(id), () => queryDatabase(id)),
        stats: () => ({}),
        close: async () => {},
      }
    }

    case 'spinlock': {
      // The seed's design: no L1, lease 5 s, 100 ms sleep between tries, its 50-retry limit (5 s).
      const spin = new SpinLockCache(deps.naiveRedis(), run.cache.ttl, 100, 5_000, 50)
      return {
        get: (id) => spin.getOrLoad(`${run.namespace}:${id}`, () => queryDatabase(id)),
        stats: () => ({}),
        close: async () => {},
      }
    }

    case 'lock':
    case 'full': {
      // Imported on first use: the none/naive modes never load stampede-guard at all.
      const { createCache } = await import('../../../src/index.js')
      const o = run.cache
      const cache = createCache({
        ...(deps.redis ? { redis: deps.redis } : {}),
        namespace: run.namespace,
        ttl: o.ttl,
        // Zero means "off": leave the option out rather than rely on how 0 validates.
        ...(o.staleTtl > 0 ? { staleTtl: o.staleTtl } : {}),
        ...(o.staleIfError > 0 ? { staleIfError: o.staleIfError } : {}),
        earlyRefresh: o.earlyRefresh,
        l1: o.l1 ? { max: 10_000 } : false,
      })
      const { probe } = deps
      if (probe) cache.on('waited', (wait) => wait.outcome === 'value' && probe.waitedForValue(wait.key))
      return {
        get: (id) => cache.getOrLoad(String(id), () => queryDatabase(id)),
        stats: () => numericFields(cache.stats()),
        close: () => cache.close(),
      }
    }
  }
}

/** stats() may nest or carry non-counters; the harness sums flat numbers only. */
function numericFields(stats: object): Record<string, number> {
  const out: Record<string, number> = {}
  for (const [k, v] of Object.entries(stats)) if (typeof v === 'number') out[k] = v
  return out
}
