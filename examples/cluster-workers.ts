/**
 * Example 3: several worker processes (node:cluster) share one Redis; on a miss the
 * loader runs ONCE across all of them.
 *
 *   REDIS_URL=redis://127.0.0.1:6379 npx tsx examples/cluster-workers.ts
 *
 * The primary starts 4 workers, waits until they are all ready, then tells them to go:
 * each worker makes 10 concurrent getOrLoad calls for the same key. Every loader run is
 * reported to the primary, which prints the total and exits.
 */
import cluster from 'node:cluster'
import { setTimeout as sleep } from 'node:timers/promises'
import { Redis } from 'ioredis'
import { createCache } from '../src/index.js' // in your project: from 'stampede-guard'

const WORKERS = 4
const CALLS_PER_WORKER = 10
const KEY = 'pricing-table'

type Message =
  { type: 'ready' } | { type: 'loader-ran'; pid: number } | { type: 'done'; values: number } | { type: 'go' }

function makeCache(redis: Redis | undefined) {
  return createCache({ redis, namespace: 'example-cluster', ttl: '30s' })
}

if (cluster.isPrimary) {
  const redis = process.env.REDIS_URL ? new Redis(process.env.REDIS_URL) : undefined
  if (!redis)
    console.log(`REDIS_URL is not set: in-process mode, so each worker loads on its own (up to ${WORKERS} loads)`)
  // Start cold: remove what a previous run left.
  const admin = makeCache(redis)
  await admin.delete(KEY)
  await admin.close()

  const workers = Array.from({ length: WORKERS }, () => cluster.fork())
  const loaderRuns: number[] = []
  let ready = 0
  let done = 0
  let calls = 0
  const finished = new Promise<void>((resolve) => {
    for (const worker of workers) {
      worker.on('message', (m: Message) => {
        if (m.type === 'ready' && ++ready === WORKERS) for (const w of workers) w.send({ type: 'go' } satisfies Message)
        if (m.type === 'loader-ran') loaderRuns.push(m.pid)
        if (m.type === 'done') {
          calls += m.values
          if (++done === WORKERS) resolve()
        }
      })
    }
  })
  await finished
  console.log(
    `${calls} getOrLoad calls in ${WORKERS} processes → the loader ran ${loaderRuns.length} time(s) (in pid ${loaderRuns.join(', ')})`,
  )
  for (const w of workers) w.disconnect()
  await redis?.quit()
  if (redis && loaderRuns.length !== 1) process.exitCode = 1
} else {
  const redis = process.env.REDIS_URL ? new Redis(process.env.REDIS_URL) : undefined
  const cache = makeCache(redis)
  const send = (m: Message) => process.send!(m)

  // The expensive computation: it tells the primary each time it actually runs.
  async function buildPricingTable(): Promise<{ plans: string[]; builtBy: number }> {
    send({ type: 'loader-ran', pid: process.pid })
    await sleep(150)
    return { plans: ['free', 'pro', 'team'], builtBy: process.pid }
  }

  process.on('message', async (m: Message) => {
    if (m.type !== 'go') return
    const values = await Promise.all(
      Array.from({ length: CALLS_PER_WORKER }, () => cache.getOrLoad(KEY, buildPricingTable)),
    )
    console.log(`worker ${process.pid}: got the table built by pid ${values[0]!.builtBy}`)
    send({ type: 'done', values: values.length })
    await cache.close()
    await redis?.quit()
  })
  send({ type: 'ready' })
}
