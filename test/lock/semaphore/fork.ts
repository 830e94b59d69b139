/** Forks `count` workers of `module` with `env`, two at a time (tsx start-up on a loaded 2-core machine is slow). */
import { forkWorker, type Worker } from '../../support/workers.js'

export async function forkTwoAtATime(module: URL, count: number, env: Record<string, string>): Promise<Worker[]> {
  const started: Worker[] = []
  while (started.length < count)
    started.push(
      ...(await Promise.all(
        Array.from({ length: Math.min(2, count - started.length) }, () => forkWorker(module, { env })),
      )),
    )
  return started
}

const CLOCK_SHIM = new URL('./clock-shim.mjs', import.meta.url).href

/** The env of a worker whose wall clock is `offsetMs` off (./clock-shim.mjs, loaded before any module). */
export function clockOffsetEnv(offsetMs: number | undefined): Record<string, string> {
  if (!offsetMs) return {}
  const inherited = process.env.NODE_OPTIONS ?? ''
  return { NODE_OPTIONS: `${inherited} --import=${CLOCK_SHIM}`.trim(), CLOCK_OFFSET_MS: String(offsetMs) }
}
