/** What the zipf probe reports per mode: the phases of a miss, commands, CPU (`phases.ts` computes it). */
import type { RedisUsage } from '../redis-usage.js'

export interface PhaseTiming {
  phase: string
  samples: number
  p50: number
  p90: number
  p99: number
  max: number
}

export interface PhaseSummary {
  requests: number
  /** Requests that found no request for their item running in their worker. */
  flights: number
  /** Of those, the ones answered without any Redis command (L1). */
  flightsWithoutRedis: number
  /** The fewest loads that serve every request: per item, a load at the first request not covered by the last one (db latency + ttl). */
  idealLoads: number
  phases: PhaseTiming[]
  /** Command kind → commands sent per request. */
  commandsPerRequest: Record<string, number>
  /** Each worker's event-loop delay (ms), as `p50/p99/max`. */
  loopDelays: string[]
  /** The workers' CPU time over the run, ms (summed). */
  workerCpuMs: number
  /** Wait outcomes matched to no commit (e.g. the value came from a fresh read). */
  unmatchedWakes: number
  /** The Redis server's own CPU and per-command time over the run (after the traffic, so a little more). */
  server?: RedisUsage
}
