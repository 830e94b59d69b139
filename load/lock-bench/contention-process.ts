/**
 * One of the processes of bench:lock's contention phase: on 'warm-up', contends with the others
 * for a warm-up key `warmUpHolds` times (JIT, script cache, subscriptions; unmeasured);
 * on 'go', takes the measured key `holds` times with the contender's lock, holds it 3–7 ms
 * each time, and reports when it got it and when it began to release it
 * (performance.timeOrigin + performance.now()), and how late the hold's timer fired (the
 * machine's own wake-up delay, the floor under any hand-off) and its GC pauses meanwhile;
 * on 'close', closes its lock and leaves.
 * env BENCH_REDIS_URLS (comma-separated), plus the consensus servers'.
 */
import { PerformanceObserver } from 'node:perf_hooks'
import { setTimeout as sleep } from 'node:timers/promises'
import { consensusEnvFromProcess } from './consensus-contenders.js'
import { BENCH_CONTENDERS } from './contenders.js'
import type { BenchLock } from './contender.js'
import type { ContentionReport, ToContention } from './protocol.js'

const env = { redisUrls: process.env.BENCH_REDIS_URLS!.split(','), ...consensusEnvFromProcess() }
const now = () => performance.timeOrigin + performance.now()

const nextMessage = () => new Promise((resolve) => process.once('message', resolve))

async function take(lock: BenchLock, key: string, times: number): Promise<ContentionReport['holds']> {
  const holds: ContentionReport['holds'] = []
  for (let i = 0; i < times; i++) {
    const release = await lock.acquire(key, 60_000)
    const acquiredAt = now()
    const holdMs = 3 + Math.random() * 4
    await sleep(holdMs)
    const releasedAt = now()
    await release()
    holds.push({ acquiredAt, releasedAt, pid: process.pid, timerLateMs: releasedAt - acquiredAt - holdMs })
  }
  return holds
}

process.once('message', async (message: Extract<ToContention, { type: 'start' }>) => {
  const lock = await BENCH_CONTENDERS.find((c) => c.name === message.contender)!.create(env)
  process.send?.({ type: 'ready' })
  let holds: ContentionReport['holds'] = []
  let error: string | undefined
  const failed = (caught: unknown) => (error ??= String((caught as Error)?.message ?? caught))
  await nextMessage() // 'warm-up': every process has connected
  await take(lock, `${message.key}:warm-up`, message.warmUpHolds).catch(failed)
  process.send?.({ type: 'warm' })
  await nextMessage() // 'go': every process has warmed up
  const gcPauses: ContentionReport['gcPauses'] = []
  const gc = new PerformanceObserver((list) => {
    for (const entry of list.getEntries())
      gcPauses.push({ at: performance.timeOrigin + entry.startTime, ms: entry.duration })
  })
  gc.observe({ entryTypes: ['gc'] })
  if (error === undefined) holds = await take(lock, message.key, message.holds).catch((caught) => (failed(caught), []))
  gc.disconnect()
  process.send?.({ type: 'done', holds, gcPauses, error } satisfies ContentionReport)
  await nextMessage() // 'close': every process has finished its measured holds
  await lock.close()
  process.disconnect()
})
