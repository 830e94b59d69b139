/**
 * Harness side of the load-test app: starts the cluster primary (load/stampede/app/primary.ts) in
 * a child process and gives the harness typed, promise-returning calls over its IPC.
 */
import { fileURLToPath } from 'node:url'
import { forkTs } from '../../shared/fork-ts.js'
import type { SourceKind } from '../db/source.js'
import type { ProbeReport } from './miss-probe.js'
import type { HarnessToPrimary, PrimaryToHarness, QueryBins, RunConfig } from './protocol.js'

export interface AppClusterOptions {
  workers: number
  /** undefined = in-process mode (no Redis). */
  redisUrl: string | undefined
  source: SourceKind
  /** A module whose `createItemLoader` the workers use instead of load/app/item-loader.ts (absolute path). */
  itemLoaderModule?: string
  /** How long to wait for the workers to start listening. */
  startTimeoutMs?: number
}

export interface Collected {
  bins: QueryBins
  failedQueries: number
  stats: Record<string, number>
  /** Age of the oldest value any worker answered with (ms since the database read it). */
  oldestServedMs: number
  /** CPU time the workers used over the run (user + system, ms, summed over workers). */
  cpuMs: number
  /** One per worker, when the run was probed. */
  probes: ProbeReport[]
}

export interface AppCluster {
  readonly url: string
  readonly workers: number
  configure(run: RunConfig): Promise<void>
  setDbFailureRate(rate: number): void
  collect(runId: string): Promise<Collected>
  /** Live query counts while a run is in flight. */
  onQueries(listener: (runId: string, bins: QueryBins) => void): void
  stop(): Promise<void>
}

export async function startAppCluster(options: AppClusterOptions): Promise<AppCluster> {
  const primaryPath = fileURLToPath(new URL('./primary.ts', import.meta.url))
  // The workers inherit the primary's execArgv, so tsx's loader too.
  const child = forkTs(primaryPath, {
    LOAD_WORKERS: String(options.workers),
    LOAD_REDIS_URL: options.redisUrl ?? '',
    LOAD_SOURCE: JSON.stringify(options.source),
    LOAD_ITEM_LOADER: options.itemLoaderModule ?? '',
  })

  let fatal: Error | undefined
  const waiters = new Set<{
    match: (m: PrimaryToHarness) => boolean
    resolve: (m: PrimaryToHarness) => void
    reject: (e: Error) => void
  }>()
  const queryListeners: ((runId: string, bins: QueryBins) => void)[] = []

  const failAll = (err: Error) => {
    fatal ??= err
    for (const w of waiters) w.reject(err)
    waiters.clear()
  }
  child.on('message', (message: PrimaryToHarness) => {
    if (message.type === 'fatal') return failAll(new Error(`load-test app: ${message.message}`))
    if (message.type === 'queries') for (const l of queryListeners) l(message.runId, message.bins)
    for (const w of waiters) {
      if (w.match(message)) {
        waiters.delete(w)
        w.resolve(message)
      }
    }
  })
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
  child.once('exit', (code, signal) =>
    failAll(new Error(`load-test app primary exited (code ${code}, signal ${signal})`)),
  )

  function next<T extends PrimaryToHarness['type']>(
    type: T,
    runId: string | undefined,
    timeoutMs: number,
  ): Promise<Extract<PrimaryToHarness, { type: T }>> {
    if (fatal) return Promise.reject(fatal)
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        waiters.delete(waiter)
        reject(new Error(`load-test app: no '${type}' within ${timeoutMs} ms`))
      }, timeoutMs)
      const waiter = {
        match: (m: PrimaryToHarness) => m.type === type && (runId === undefined || ('runId' in m && m.runId === runId)),
        resolve: (m: PrimaryToHarness) => {
          clearTimeout(timer)
          resolve(m as Extract<PrimaryToHarness, { type: T }>)
        },
        reject: (e: Error) => {
          clearTimeout(timer)
          reject(e)
        },
      }
      waiters.add(waiter)
    })
  }
  const send = (message: HarnessToPrimary) => {
    if (child.connected) child.send(message)
  }
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return
    send({ type: 'shutdown' })
    const timer = setTimeout(() => child.kill('SIGKILL'), 5_000)
    await exited
    clearTimeout(timer)
  }

  let ready: Extract<PrimaryToHarness, { type: 'ready' }>
  try {
    ready = await next('ready', undefined, options.startTimeoutMs ?? 30_000)
  } catch (err) {
    await stop()
    throw err
  }

  return {
    url: `http://127.0.0.1:${ready.port}`,
    workers: ready.workers,
    async configure(run) {
      const done = next('configured', run.runId, 15_000)
      send({ type: 'configure', run })
      await done
    },
    setDbFailureRate(rate) {
      send({ type: 'db-failure-rate', rate })
    },
    async collect(runId) {
      const done = next('collected', runId, 15_000)
      send({ type: 'collect', runId })
      const { bins, failedQueries, stats, oldestServedMs, cpuMs, probes } = await done
      return { bins, failedQueries, stats, oldestServedMs, cpuMs, probes }
    },
    onQueries(listener) {
      queryListeners.push(listener)
    },
    stop,
  }
}
