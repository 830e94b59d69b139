/**
 * One freshly started app process of the first-burst benchmark: creates its cache, says
 * 'ready' (after `cache.ready()` when BENCH_AWAIT_READY=1, else at once), then on 'go'
 * sends `calls` concurrent getOrLoad calls for one cold key and reports each call's latency.
 */
import { setTimeout as sleep } from 'node:timers/promises'
import { Redis } from 'ioredis'
import { createCache } from '../../src/index.js'
import type { BurstChildToParent, BurstParentToChild } from './protocol.js'

const send = (m: BurstChildToParent) => process.send?.(m)
const redis = new Redis(process.env.BENCH_REDIS_URL!)
// When the connection came up, for BENCH_DEBUG: a process still starting up when the burst begins shows a positive one.
let connectedAt = redis.status === 'ready' ? performance.now() : Infinity
redis.once('ready', () => (connectedAt = performance.now()))
const cache = createCache({ redis, namespace: process.env.BENCH_NAMESPACE!, ttl: '60s' })
// `ready` is new with this benchmark's change; on older code the process answers at once.
const ready = (cache as { ready?: () => Promise<void> }).ready
if (process.env.BENCH_AWAIT_READY === '1' && ready) await ready.call(cache)
send({ type: 'ready' })

process.on('message', async (m: BurstParentToChild) => {
  if (m.type === 'exit') {
    await cache.close()
    redis.disconnect()
    process.exit(0)
  }
  const goAt = performance.timeOrigin + performance.now()
  const goNow = performance.now()
  let loaderAt: number | undefined
  const samples = await Promise.all(
    Array.from({ length: m.calls }, async () => {
      let ranLoader = false
      const startedAt = performance.now()
      await cache.getOrLoad(m.key, async () => {
        ranLoader = true
        loaderAt ??= performance.now()
        await sleep(m.loaderMs)
        return { key: m.key, by: process.pid }
      })
      return { ms: performance.now() - startedAt, ranLoader }
    }),
  )
  send({
    type: 'burst',
    samples,
    goAt,
    led: samples.some((s) => s.ranLoader),
    connectedMs: connectedAt - goNow,
    loaderMs: loaderAt === undefined ? undefined : loaderAt - goNow,
  })
})
process.on('disconnect', () => process.exit(0))
