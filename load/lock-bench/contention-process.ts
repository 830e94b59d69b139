/**
 * One of the processes of bench:lock's contention phase: on 'go', takes one key `holds`
 * times with the contender's lock, holds it 3–7 ms each time, and reports when it got it
 * and when it began to release it (performance.timeOrigin + performance.now()).
 * env BENCH_REDIS_URLS (comma-separated), plus the consensus servers'.
 */
import { setTimeout as sleep } from 'node:timers/promises'
import { consensusEnvFromProcess } from './consensus-contenders.js'
import { BENCH_CONTENDERS } from './contenders.js'
import type { ContentionReport, ToContention } from './protocol.js'

const env = { redisUrls: process.env.BENCH_REDIS_URLS!.split(','), ...consensusEnvFromProcess() }
const now = () => performance.timeOrigin + performance.now()

process.once('message', async (message: Extract<ToContention, { type: 'start' }>) => {
  const lock = await BENCH_CONTENDERS.find((c) => c.name === message.contender)!.create(env)
  process.send?.({ type: 'ready' })
  await new Promise((resolve) => process.once('message', resolve)) // 'go': every process has connected
  const holds: ContentionReport['holds'] = []
  let error: string | undefined
  try {
    for (let i = 0; i < message.holds; i++) {
      const release = await lock.acquire(message.key, 60_000)
      const acquiredAt = now()
      await sleep(3 + Math.random() * 4)
      const releasedAt = now()
      await release()
      holds.push({ acquiredAt, releasedAt, pid: process.pid })
    }
  } catch (caught) {
    error = String((caught as Error)?.message ?? caught)
  }
  await lock.close()
  process.send?.({ type: 'done', holds, error } satisfies ContentionReport)
  process.disconnect()
})
