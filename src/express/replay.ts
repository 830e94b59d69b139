import type { ServerResponse } from 'node:http'
import { replayPlan, type Replayable, type ReplayOptions } from '../http/replay.js'

/**
 * Sends `response` on the live response object, through whatever middleware before
 * cacheRoute wrapped it (compression before us compresses here). What goes out is the
 * engine's replay plan (src/http/replay.ts).
 */
export function replay(res: ServerResponse, response: Replayable, options: ReplayOptions): void {
  const plan = replayPlan(response, options)
  for (const name of plan.remove) if (name !== 'content-length') res.removeHeader(name)
  for (const [name, value] of plan.headers) res.setHeader(name, value)
  res.statusCode = plan.status
  if (plan.statusMessage !== undefined) res.statusMessage = plan.statusMessage
  if (plan.body === undefined) {
    res.removeHeader('Content-Length')
    res.end()
    return
  }
  if (options.head) res.end()
  else res.end(plan.body)
}
