import { describe, expect, it } from 'vitest'
import type { ThrowKind } from '../fixtures/cache-worker.js'
import { redisAvailable } from '../support/redis.js'
import { until } from '../support/timing.js'
import { useWorkerSuite } from '../support/worker-suite.js'

const WORKER = new URL('../fixtures/cache-worker.ts', import.meta.url)

interface CallResult {
  ok: boolean
  error?: string
}

describe.skipIf(!redisAvailable)('awkward loader errors across processes', () => {
  const suite = useWorkerSuite(WORKER)
  const redis = suite.redis
  const LEASE_MS = 20_000

  async function timeCalls(): Promise<number> {
    return Number(/^cmdstat_time:calls=(\d+)/m.exec(await redis().info('commandstats'))?.[1] ?? 0)
  }

  const cases: [ThrowKind, string][] = [
    // The getters throw: the remote side gets the constructor's name and says the message was unreadable.
    ['evil-getters', 'Error: (its message could not be read)'],
    // `|`, a newline, quotes and a lone surrogate all arrive as thrown (the surrogate would be U+FFFD as raw UTF-8).
    ['pipe-in-name', 'Db|Error: a|b\nc "quoted" \uD800'],
    ['string', 'NonError: plain string thrown'],
  ]

  it.each(cases)(
    'a loader throwing %s: the waiter in another process gets a RemoteLoaderError saying so, and the lock is released at once',
    async (throws, described) => {
      const options = {
        CACHE_OPTIONS: JSON.stringify({ lock: { lease: LEASE_MS }, waitTimeout: '50s', onWaitTimeout: 'throw' }),
      }
      const [leader, waiter] = await suite.spawn(2, options)
      await redis().config('RESETSTAT')
      const led = leader!.request<CallResult[]>({
        op: 'burst',
        keys: ['boom'],
        calls: 2,
        loaderMs: 0,
        throws,
        holdUntilKey: 'fail-now',
      })
      await until(async () => Number(await redis().get('loads:boom')) === 1, 'the leader to start loading')
      const waited = waiter!.request<CallResult[]>({ op: 'burst', keys: ['boom'], calls: 2, loaderMs: 0 })
      // Fail only once the waiter waits: it has looked up, subscribed and looked again (each lookup
      // reads TIME once; nothing else has yet), else it could find the lock gone and load itself.
      await until(async () => (await timeCalls()) >= 3, 'the waiter to look up, subscribe and re-check', 30_000)
      const failedAt = Date.now()
      await redis().set('fail-now', '1')

      const leaderResults = await led
      expect(leaderResults.every((r) => !r.ok)).toBe(true) // its callers get what the loader threw
      const waiterResults = await waited
      expect(Date.now() - failedAt).toBeLessThan(LEASE_MS) // not after the lease ran out
      for (const result of waiterResults) {
        expect(result.ok).toBe(false)
        expect(result.error).toBe(`RemoteLoaderError: loader for "boom" failed in another process: ${described}`)
      }
      expect(Number(await redis().get('loads:boom'))).toBe(1) // the waiter ran no loader
      expect(await redis().exists('sg:{k:boom}:lock')).toBe(0)
    },
  )
})
