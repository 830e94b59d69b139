/**
 * A child process of the wake-up benchmark: the leader or one of the waiter processes.
 * Times are absolute (performance.timeOrigin + performance.now()) so the parent can put
 * every process's events on one timeline; it also measures each child's clock offset.
 */
import { setTimeout as sleep } from 'node:timers/promises'
import { Redis } from 'ioredis'
import { createCache } from '../../src/index.js'
import { SpinLockCache } from './spin-lock-cache.js'
import type { ChildToParent, ParentToChild, Strategy } from './protocol.js'

const now = () => performance.timeOrigin + performance.now()
const send = (m: ChildToParent) => process.send?.(m)

const redis = new Redis(process.env.BENCH_REDIS_URL!)
const namespace = process.env.BENCH_NAMESPACE!
// L1 off: every round uses a new key anyway, and we want the cross-process path only.
const guard = createCache({ redis, namespace, ttl: '60s', l1: false })
const spin = new SpinLockCache(redis, 60_000)

function getOrLoad<T>(strategy: Strategy, key: string, loader: () => Promise<T>): Promise<T> {
  return strategy === 'stampede-guard' ? guard.getOrLoad(key, loader) : spin.getOrLoad(key, loader)
}

async function lead(strategy: Strategy, key: string, holdMs: number): Promise<void> {
  let loaderDoneAt = 0
  await getOrLoad(strategy, key, async () => {
    send({ type: 'loading', key })
    await sleep(holdMs)
    loaderDoneAt = now()
    return { key, at: loaderDoneAt }
  })
  send({ type: 'led', key, loaderDoneAt, returnedAt: now() })
}

async function wait(strategy: Strategy, key: string, callers: number): Promise<void> {
  const samples = await Promise.all(
    Array.from({ length: callers }, async () => {
      let ranLoader = false
      const startedAt = now()
      await getOrLoad(strategy, key, async () => {
        ranLoader = true // should never happen: the leader holds the lock
        return { key, at: now() }
      })
      return { startedAt, returnedAt: now(), ranLoader }
    }),
  )
  send({ type: 'waited', key, samples })
}

process.on('message', (m: ParentToChild) => {
  const fail = (err: unknown) => send({ type: 'error', message: String(err) })
  if (m.type === 'clock') send({ type: 'clock', seq: m.seq, now: now() })
  else if (m.type === 'lead') lead(m.strategy, m.key, m.holdMs).catch(fail)
  else if (m.type === 'wait') wait(m.strategy, m.key, m.callers).catch(fail)
  else if (m.type === 'exit') {
    guard
      .close()
      .finally(() => redis.quit())
      .finally(() => process.exit(0))
  }
})
process.on('disconnect', () => process.exit(0))

await redis.ping()
send({ type: 'ready' })
