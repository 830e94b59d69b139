/**
 * The traffic patterns the modes are compared under. Each is data: the harness runs
 * every mode through the same scenario (same connections, duration, keys, timeline).
 */
import type { ScenarioCachePolicy } from './modes.js'

export const SCENARIO_NAMES = ['cold', 'expiry', 'zipf', 'flaky', 'outage'] as const
export type ScenarioName = (typeof SCENARIO_NAMES)[number]

export function isScenarioName(value: string): value is ScenarioName {
  return (SCENARIO_NAMES as readonly string[]).includes(value)
}

export type KeyPattern = { kind: 'single'; id: number } | { kind: 'zipf'; count: number; exponent: number }

/** Something the harness does at a point of a run (ms after the traffic starts). */
export type TimelineEvent =
  { atMs: number; action: 'db-failure-rate'; rate: number } | { atMs: number; action: 'redis-outage'; forMs: number }

export interface Scenario {
  name: ScenarioName
  /** One line, for the table heading. */
  title: string
  /** What happens and what to look for, for someone who has never heard of a cache stampede. */
  explain: string
  durationMs: number
  connections: number
  keys: KeyPattern
  cache: ScenarioCachePolicy
  timeline: TimelineEvent[]
  /** The outage kills and restarts Redis: only possible with a redis-server we started. */
  needsPrivateRedis: boolean
}

/** A scenario as defined: title and explanation are written from the actual duration and connections. */
interface ScenarioDefinition extends Omit<Scenario, 'title' | 'explain'> {
  title: (p: TextParams) => string
  explain: (p: TextParams) => string
}
interface TextParams {
  /** Traffic time per mode, e.g. "10 s". */
  duration: string
  seconds: number
  connections: number
}

const scenarios: Record<ScenarioName, ScenarioDefinition> = {
  cold: {
    name: 'cold',
    title: (p) => `cold: ${p.connections} connections hit one key that is not cached yet`,
    explain: (p) =>
      `Right after a deploy or a cache flush, a popular page is requested by ${p.connections} clients at once and nobody has it cached. ` +
      'Every request that misses goes to the database, so what matters is how many queries the FIRST burst causes.',
    durationMs: 3_000,
    connections: 200,
    keys: { kind: 'single', id: 1 },
    cache: { ttlMs: 60_000, staleTtlMs: 60_000, staleIfErrorMs: 60_000 },
    timeline: [],
    needsPrivateRedis: false,
  },
  expiry: {
    name: 'expiry',
    title: (p) => `expiry: one hot key with a 1 s TTL, hammered for ${p.duration}`,
    explain: (p) =>
      'A hot key expires every second. Each time it does, every request in flight misses at the same moment. ' +
      `A good cache makes about one query per TTL window (about ${Math.round(p.seconds)} here); a naive one makes a burst each time.`,
    durationMs: 10_000,
    connections: 50,
    keys: { kind: 'single', id: 2 },
    cache: { ttlMs: 1_000, staleTtlMs: 5_000, staleIfErrorMs: 30_000 },
    timeline: [],
    needsPrivateRedis: false,
  },
  zipf: {
    name: 'zipf',
    title: () => 'zipf: 1,000 keys with Zipf-like popularity, 2 s TTL',
    explain: () =>
      'Real traffic: a few keys are very hot, most are lukewarm. Entries keep expiring all over the key space, ' +
      'so concurrent misses on the same key happen constantly on the hot ones.',
    durationMs: 8_000,
    connections: 100,
    keys: { kind: 'zipf', count: 1_000, exponent: 1 },
    cache: { ttlMs: 2_000, staleTtlMs: 10_000, staleIfErrorMs: 30_000 },
    timeline: [],
    needsPrivateRedis: false,
  },
  flaky: {
    name: 'flaky',
    title: (p) => `flaky: after a ${Number((p.seconds / 4).toFixed(1))} s warm-up the database fails half its queries`,
    explain: () =>
      'The database starts failing every other query. Without a fallback those failures reach the users (non-2xx); ' +
      'with stale-if-error the last good value is served instead, and the database is not hammered with retries.',
    durationMs: 8_000,
    connections: 50,
    keys: { kind: 'zipf', count: 100, exponent: 1 },
    cache: { ttlMs: 1_000, staleTtlMs: 2_000, staleIfErrorMs: 30_000 },
    timeline: [{ atMs: 2_000, action: 'db-failure-rate', rate: 0.5 }],
    needsPrivateRedis: false,
  },
  outage: {
    name: 'outage',
    title: () => 'outage: Redis is down for 3 s in the middle of the run',
    explain: () =>
      'The cache server goes away and comes back empty. A cache that treats Redis as required turns this into errors; ' +
      'a degraded-not-down cache keeps answering from the processes and single-flights the reloads.',
    durationMs: 10_000,
    connections: 50,
    keys: { kind: 'zipf', count: 100, exponent: 1 },
    cache: { ttlMs: 2_000, staleTtlMs: 10_000, staleIfErrorMs: 30_000 },
    timeline: [{ atMs: 3_000, action: 'redis-outage', forMs: 3_000 }],
    needsPrivateRedis: true,
  },
}

/**
 * A scenario with its run time (and timeline) multiplied by `timeScale` (tests use a
 * short form). The outage length is not scaled: it is the event being studied.
 */
export function getScenario(name: ScenarioName, timeScale = 1, connections?: number): Scenario {
  const s = scenarios[name]
  const durationMs = timeScale === 1 ? s.durationMs : Math.max(1_000, Math.round(s.durationMs * timeScale))
  const seconds = durationMs / 1000
  const params: TextParams = {
    duration: `${Number(seconds.toFixed(1))} s`,
    seconds,
    connections: connections ?? s.connections,
  }
  return {
    ...s,
    durationMs,
    connections: params.connections,
    timeline: s.timeline.map((e) => ({ ...e, atMs: Math.round(e.atMs * timeScale) })),
    title: s.title(params),
    explain: s.explain(params),
  }
}
