/**
 * The cache configurations compared side by side. One table row and one chart line each.
 */

/** The cache options a mode gets for one scenario (durations in ms). */
export interface ModeCacheOptions {
  ttl: number
  staleTtl: number
  staleIfError: number
  earlyRefresh: false | number | 'xfetch'
  /** false = every call goes to Redis, as the naive baseline does (isolates the lock's effect). */
  l1: boolean
}

export const MODE_NAMES = ['none', 'naive', 'spinlock', 'lock', 'full'] as const
export type ModeName = (typeof MODE_NAMES)[number]
/** What runs when no `--modes` is given: the spin lock is a baseline asked for by name. */
export const DEFAULT_MODES: readonly ModeName[] = ['none', 'naive', 'lock', 'full']

export const MODE_DESCRIPTIONS: Record<ModeName, string> = {
  none: 'no cache: every request queries the database',
  naive: 'GET/SET read-through cache in Redis, no lock (what most apps start with)',
  spinlock:
    'the seed spin lock: GET, else SET NX PX + token, load, SET, Lua compare-and-delete; busy = sleep 100 ms and retry; no L1',
  lock: 'stampede-guard, lock only: one loader per miss across all processes; no stale, no early refresh, no L1 (with Redis)',
  full: 'stampede-guard, everything on: lock + stale-while-revalidate + early refresh + stale-if-error + L1',
}

/** Modes that need Redis (naive stores in Redis; the others can run in-process). */
export const NEEDS_REDIS: ReadonlySet<ModeName> = new Set<ModeName>(['naive', 'spinlock'])

export function isModeName(value: string): value is ModeName {
  return (MODE_NAMES as readonly string[]).includes(value)
}

/** Scenario knobs a mode's options derive from. */
export interface ScenarioCachePolicy {
  ttlMs: number
  /** Grace for `full`: how long past ttl a stale value may be served while one process refreshes. */
  staleTtlMs: number
  /** Fail-safe window for `full`: stale values cover loader errors for this long. */
  staleIfErrorMs: number
}

/**
 * What each mode turns on. `none` and `naive` only read `ttl`.
 * `lock` runs without L1 so that, like `naive`, every request goes to Redis; in
 * in-process mode (no Redis) L1 is the only place a value can live, so it stays on there.
 */
export function cacheOptionsFor(mode: ModeName, policy: ScenarioCachePolicy, withRedis = true): ModeCacheOptions {
  const off: ModeCacheOptions = { ttl: policy.ttlMs, staleTtl: 0, staleIfError: 0, earlyRefresh: false, l1: !withRedis }
  if (mode !== 'full') return off
  return {
    ttl: policy.ttlMs,
    staleTtl: policy.staleTtlMs,
    staleIfError: policy.staleIfErrorMs,
    earlyRefresh: 'xfetch',
    l1: true,
  }
}
