/**
 * The cluster primary of the load-test app: forks W workers sharing one port, relays the
 * harness's commands to them and sums their answers.
 *
 * It runs in its own process (forked by load/stampede/app/cluster.ts) rather than in the harness,
 * so that the harness can be anything — the CLI, the demo, a vitest test — without
 * node:cluster needing to be set up in that process.
 */
import cluster, { type Worker } from 'node:cluster'
import { fileURLToPath } from 'node:url'
import {
  mergeBins,
  mergeStats,
  type HarnessToPrimary,
  type PrimaryToHarness,
  type QueryBins,
  type WorkerToPrimary,
} from './protocol.js'
import type { ProbeReport } from './miss-probe.js'

const workerCount = Number(process.env.LOAD_WORKERS ?? 4)
let shuttingDown = false

function toHarness(message: PrimaryToHarness): void {
  process.send?.(message)
}

// LOAD_CPU_PROF=<dir>: each worker writes a V8 CPU profile there when it exits (where a miss spends CPU).
const profileDir = process.env.LOAD_CPU_PROF
cluster.setupPrimary({
  exec: fileURLToPath(new URL('./worker.ts', import.meta.url)),
  execArgv: profileDir ? [...process.execArgv, '--cpu-prof', `--cpu-prof-dir=${profileDir}`] : process.execArgv,
})

const workers: Worker[] = []
for (let i = 0; i < workerCount; i++) workers.push(cluster.fork(process.env))

cluster.on('exit', (worker, code, signal) => {
  if (shuttingDown) return
  toHarness({ type: 'fatal', message: `worker ${worker.process.pid} exited (code ${code}, signal ${signal})` })
  shutdown(1)
})

/** Resolves with one message of `type` (matching `runId` if given) from every worker. */
function fromEveryWorker<T extends WorkerToPrimary['type']>(
  type: T,
  runId?: string,
): Promise<Extract<WorkerToPrimary, { type: T }>[]> {
  return Promise.all(
    workers.map(
      (worker) =>
        new Promise<Extract<WorkerToPrimary, { type: T }>>((resolve) => {
          const onMessage = (message: WorkerToPrimary) => {
            if (message.type !== type) return
            if (runId !== undefined && 'runId' in message && message.runId !== runId) return
            worker.off('message', onMessage)
            resolve(message as Extract<WorkerToPrimary, { type: T }>)
          }
          worker.on('message', onMessage)
        }),
    ),
  )
}

for (const worker of workers) {
  worker.on('message', (message: WorkerToPrimary) => {
    if (message.type === 'queries') toHarness(message)
    else if (message.type === 'fatal') toHarness(message)
  })
}

fromEveryWorker('listening').then((answers) => {
  const ports = new Set(answers.map((a) => a.port))
  if (ports.size !== 1) {
    toHarness({ type: 'fatal', message: `workers listen on different ports: ${[...ports].join(', ')}` })
    return shutdown(1)
  }
  toHarness({ type: 'ready', port: answers[0]!.port, workers: workers.length })
})

process.on('message', (message: HarnessToPrimary) => {
  switch (message.type) {
    case 'configure': {
      const done = fromEveryWorker('configured', message.run.runId)
      for (const w of workers) w.send(message)
      done.then(() => toHarness({ type: 'configured', runId: message.run.runId }))
      break
    }
    case 'db-failure-rate':
      for (const w of workers) w.send(message)
      break
    case 'collect': {
      const done = fromEveryWorker('collected', message.runId)
      for (const w of workers) w.send(message)
      done.then((answers) => {
        const bins: QueryBins = {}
        const stats: Record<string, number> = {}
        let failedQueries = 0
        let oldestServedMs = 0
        let cpuMs = 0
        const probes: ProbeReport[] = []
        for (const a of answers) {
          if (a.probe) probes.push(a.probe)
          oldestServedMs = Math.max(oldestServedMs, a.oldestServedMs)
          mergeBins(bins, a.bins)
          mergeStats(stats, a.stats)
          failedQueries += a.failedQueries
          cpuMs += a.cpuMs
        }
        toHarness({
          type: 'collected',
          runId: message.runId,
          bins,
          failedQueries,
          stats,
          oldestServedMs,
          cpuMs,
          probes,
        })
      })
      break
    }
    case 'shutdown':
      shutdown(0)
      break
  }
})

function shutdown(code: number): void {
  if (shuttingDown) return
  shuttingDown = true
  for (const w of workers) w.process.kill('SIGTERM')
  // Give workers a moment to go; then leave regardless (they also exit on disconnect).
  setTimeout(() => process.exit(code), profileDir ? 10_000 : 500).unref()
  Promise.all(workers.map((w) => new Promise((r) => (w.isDead() ? r(null) : w.once('exit', r))))).then(() =>
    process.exit(code),
  )
}

// The harness died or closed the channel: never leave workers behind.
process.on('disconnect', () => shutdown(0))
for (const sig of ['SIGINT', 'SIGTERM'] as const) process.on(sig, () => shutdown(0))
