/**
 * `locks.coalesce` when the runner loses its lease mid-run while a trigger is pending: the
 * pending run must still happen, exactly once, and the running key must end free. The
 * runner's connection goes through a proxy that stalls its traffic
 * (test/support/blackhole-proxy.ts): replies only (renewals still reach Redis and keep the
 * claim, but are confirmed too late: the lease is lost locally only), or both ways until
 * the store's lease has run out.
 */
import { describe, expect, it } from 'vitest'
import { commandsSinceReset } from '../../support/command-stats.js'
import { useRedisServer } from '../../support/redis-suite.js'
import { useStalledRunner } from '../../support/stalled-runner.js'
import { abortReason, gate, sleep, until } from '../../support/timing.js'

describe('coalesce: a lease lost mid-run with a trigger pending (Redis)', () => {
  const redis = useRedisServer()
  let count = 0
  const fresh = () => `loss-${++count}`
  const stalledRunner = useStalledRunner(redis)

  /**
   * A runner whose connection goes through a proxy starts a job; its run 0 waits for its
   * signal to abort (`untilLost`), then for `release`. Meanwhile an ordinary instance
   * triggers it, which is recorded as pending.
   */
  async function runWithPendingTrigger(untilLost: boolean) {
    const name = fresh()
    // Warmed up by a run past one renewal (lease/3).
    const { proxy, runner, other } = await stalledRunner('co', '1s', (locks) =>
      locks.coalesce(fresh(), () => sleep(500)),
    )
    const runs: number[] = []
    const release = gate()
    const aborted: unknown[] = []
    const result = runner.coalesce(name, async ({ run, signal }) => {
      runs.push(run)
      if (run === 0) {
        if (untilLost) aborted.push(await abortReason(signal, 'the runner to lose its lease locally'))
        await release.promise
      }
      return run
    })
    await until(() => runs.length === 1, 'run 0 to start')
    const running = `co:{c:${name}}`
    const firstOwner = await redis.admin().get(running)
    await expect(other.coalesce(name, () => 'other')).resolves.toEqual({ ran: false })
    /** The pending trigger was run once, by the runner's call, and the claim ended free. */
    const expectPendingRanOnce = async () => {
      await expect(result).resolves.toEqual({ ran: true, runs: 2, value: 1 })
      expect(runs).toEqual([0, 1])
      expect(await redis.admin().exists(running, `${running}:pending`)).toBe(0)
    }
    return { proxy, running, firstOwner, aborted, release, expectPendingRanOnce }
  }

  it('lost locally only (replies late, the claim still ours in Redis): the pending run happens once, the key ends free', async () => {
    const job = await runWithPendingTrigger(true)
    job.proxy.stall('replies')
    await until(() => job.aborted.length === 1, 'the local loss')
    expect(job.aborted[0]).toMatchObject({ name: 'LockLostError' })
    // The renewals reached Redis: the claim is still the runner's there.
    expect(await redis.admin().get(job.running)).toBe(job.firstOwner)
    job.proxy.resume()
    job.release.open()
    await job.expectPendingRanOnce()
  })

  it('lost in Redis too (the lease ran out there): the pending run happens once, the key ends free', async () => {
    const job = await runWithPendingTrigger(true)
    job.proxy.stall('both')
    await until(() => job.aborted.length === 1, 'the local loss')
    await until(async () => (await redis.admin().exists(job.running)) === 0, "the claim's lease to run out in Redis")
    job.proxy.resume()
    job.release.open()
    await job.expectPendingRanOnce()
  })

  it("the finish's answer is lost: its retry hands over the same way, and the pending run happens once", async () => {
    const admin = redis.admin()
    const job = await runWithPendingTrigger(false)
    job.proxy.stall('replies')
    job.release.open()
    // The finish ran in Redis (the claim is the next run's now), but its answer is held.
    await until(async () => (await admin.get(job.running)) !== job.firstOwner, 'the finish to be applied')
    await admin.config('RESETSTAT')
    // The watchdog stopped before the finish: a script the runner sends now is the finish's retry.
    await until(async () => ((await commandsSinceReset(admin)).evalsha ?? 0) >= 1, 'the finish to be retried')
    job.proxy.resume()
    await job.expectPendingRanOnce()
  })
})
