/**
 * One bounded autocannon run against the app on 127.0.0.1, reduced to the numbers the
 * report needs.
 */
import autocannon from 'autocannon'

export interface TrafficOptions {
  /** Must be an http://127.0.0.1 URL: load tests never leave this machine. */
  url: string
  connections: number
  durationMs: number
  /** Path of each request; called per request, so a sampler can spread keys. */
  pathFor: () => string
}

export interface TrafficResult {
  requests: number
  reqPerSec: number
  latencyMs: { p50: number; p99: number; max: number }
  non2xx: number
  /** Connection errors and timeouts (no HTTP status at all). */
  errors: number
  durationMs: number
}

export async function runTraffic(options: TrafficOptions): Promise<TrafficResult> {
  const target = new URL(options.url)
  if (target.hostname !== '127.0.0.1' && target.hostname !== 'localhost')
    throw new Error(`refusing to load-test ${target.hostname}: loopback only`)
  const durationSec = options.durationMs / 1000
  let stop = () => {}
  // autocannon stops itself at `duration`; this timer is the belt to its braces.
  const hardStop = setTimeout(() => stop(), options.durationMs + 15_000)
  try {
    const result = await new Promise<autocannon.Result>((resolve, reject) => {
      const instance = autocannon(
        {
          url: options.url,
          connections: options.connections,
          duration: durationSec,
          timeout: 10,
          requests: [{ method: 'GET', setupRequest: (req) => ({ ...req, path: options.pathFor() }) }],
        },
        (err, result) => (err ? reject(err) : resolve(result)),
      )
      stop = () => instance.stop()
    })
    return {
      requests: result.requests.total,
      reqPerSec: result.requests.total / (result.duration || durationSec),
      latencyMs: { p50: result.latency.p50, p99: result.latency.p99, max: result.latency.max },
      non2xx: result.non2xx,
      errors: result.errors, // autocannon's `errors` already includes its `timeouts`
      durationMs: result.duration * 1000,
    }
  } finally {
    clearTimeout(hardStop)
  }
}
