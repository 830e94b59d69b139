/**
 * runOnce keepAlive across processes (Redis): the claim of a job running in another process
 * is renewed past lockAtMostFor, and once that process is SIGKILLed, lockAtMostFor is still
 * the crash bound: the job can run again about one lockAtMostFor after the last renewal.
 */
import { afterEach, describe, expect, it } from 'vitest'
import { createLocks } from '../../../src/lock/index.js'
import { useRedisServer } from '../../support/redis-suite.js'
import { sleep } from '../../support/timing.js'
import { forkWorker, type Worker } from '../../support/workers.js'

const WORKER = new URL('./keep-alive-worker.ts', import.meta.url)
const AT_MOST_MS = 1_000

describe('runOnce keepAlive across processes (Redis)', () => {
  const redis = useRedisServer()
  const workers: Worker[] = []
  afterEach(async () => {
    await Promise.all(workers.splice(0).map((w) => w.stop()))
  })

  it('a runner in another process keeps its claim past lockAtMostFor; SIGKILLed, the job runs again within lockAtMostFor', async () => {
    const name = `crash-${process.pid}`
    const worker = await forkWorker(WORKER, { env: { REDIS_URL: redis.server().url } })
    workers.push(worker)
    await worker.request({ op: 'start', name, atMost: AT_MOST_MS })
    const locks = createLocks({ redis: redis.server().client(), namespace: 'keep-alive' })
    try {
      const tryRun = () => locks.runOnce(name, () => 'here', { lockAtMostFor: AT_MOST_MS })
      // Three lockAtMostFor: the other process's renewals keep it.
      for (let i = 0; i < 6; i++) {
        await sleep(AT_MOST_MS / 2)
        expect((await tryRun()).ran).toBe(false)
      }
      const killedAt = performance.now()
      worker.kill('SIGKILL')
      let after = 0
      for (;;) {
        if ((await tryRun()).ran) {
          after = performance.now() - killedAt
          break
        }
        if (performance.now() - killedAt > 5 * AT_MOST_MS) throw new Error('the job never ran again')
        await sleep(25)
      }
      console.log(
        `[keepAlive crash] the job ran again ${after.toFixed(0)} ms after the runner was SIGKILLed (lockAtMostFor ${AT_MOST_MS} ms)`,
      )
      // Renewed every lockAtMostFor/3: between 2/3 and all of lockAtMostFor was left at the kill.
      expect(after).toBeGreaterThan(AT_MOST_MS / 2)
      expect(after).toBeLessThan(AT_MOST_MS + 500)
    } finally {
      await locks.close()
    }
  }, 30_000)
})
