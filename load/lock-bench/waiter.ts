/** The other process of the hand-off measurement: waits for the lock the parent holds. env BENCH_REDIS_URLS (comma-separated). */
import { consensusEnvFromProcess } from './consensus-contenders.js'
import type { BenchLock } from './contender.js'
import { BENCH_CONTENDERS } from './contenders.js'
import type { FromWaiter, ToWaiter } from './protocol.js'

const env = { redisUrls: process.env.BENCH_REDIS_URLS!.split(','), ...consensusEnvFromProcess() }
const send = (message: FromWaiter) => process.send?.(message)
const locks = new Map<string, BenchLock>()
const held = new Map<string, () => Promise<void>>()

process.on('message', async (message: ToWaiter) => {
  try {
    if (message.type === 'wait') {
      let lock = locks.get(message.contender)
      if (!lock) {
        lock = await BENCH_CONTENDERS.find((c) => c.name === message.contender)!.create(env)
        locks.set(message.contender, lock)
      }
      const acquiring = lock.acquire(message.key, 30_000)
      send({ type: 'waiting', key: message.key })
      const release = await acquiring
      const at = performance.timeOrigin + performance.now()
      held.set(message.key, release)
      send({ type: 'acquired', key: message.key, at })
    } else {
      await held.get(message.key)?.()
      held.delete(message.key)
      send({ type: 'released', key: message.key })
    }
  } catch (error) {
    send({ type: 'error', message: String((error as Error)?.message ?? error) })
  }
})
process.once('disconnect', () => {
  void Promise.all([...locks.values()].map((lock) => lock.close())).finally(() => process.exit(0))
})
send({ type: 'ready' })
