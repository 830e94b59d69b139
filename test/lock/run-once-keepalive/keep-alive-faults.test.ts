/**
 * runOnce `keepAlive` (Redis) under failing renewals, through a proxy that holds the
 * runner's traffic (test/support/blackhole-proxy.ts): renewals that never arrive, renewals
 * whose answers come late (a slow server), and `close()` during a run. Whatever happens,
 * the run's `signal` aborts before any other instance can run the job: counted by the order
 * of events, not timed.
 */
import { describe, expect, it } from 'vitest'
import { commandsSinceReset } from '../../support/command-stats.js'
import { useRedisServer } from '../../support/redis-suite.js'
import { useStalledRunner } from '../../support/stalled-runner.js'
import { abortReason, gate, sleep, until } from '../../support/timing.js'

const AT_MOST = '1s'

describe('runOnce keepAlive under failing renewals (Redis)', () => {
  const redis = useRedisServer()
  let count = 0
  const fresh = () => `faults-${++count}`
  const stalledRunner = useStalledRunner(redis)

  /**
   * A runner (through a proxy, commandTimeout well under lockAtMostFor) whose job records
   * when its signal aborts, then waits for `release`; and another instance.
   */
  async function start() {
    // Warmed up by a run past one renewal (lockAtMostFor/3).
    const { proxy, runner, other } = await stalledRunner('ka', AT_MOST, (locks) =>
      locks.runOnce(fresh(), () => sleep(500), { lockAtMostFor: AT_MOST, keepAlive: true }),
    )
    const name = fresh()
    const events: string[] = []
    const release = gate()
    const result = runner.runOnce(
      name,
      async ({ signal }) => {
        events.push('running')
        events.push(`aborted: ${((await abortReason(signal, 'the run to be told to stop')) as Error).name}`)
        await release.promise
        return 'first'
      },
      { lockAtMostFor: AT_MOST, keepAlive: true },
    )
    await until(() => events.length === 1, 'the run to start')
    /** Tries the job on the other instance until it runs (bounded); each try is an event. */
    const runElsewhere = async () => {
      await until(
        async () => (await other.runOnce(name, () => events.push('second ran'), { lockAtMostFor: AT_MOST })).ran,
        'the job to run on the other instance',
      )
    }
    return { proxy, runner, other, name, events, release, result, runElsewhere }
  }

  it('renewals that never arrive: the signal aborts before the other instance can run the job', async () => {
    const run = await start()
    run.proxy.stall('both')
    await run.runElsewhere()
    expect(run.events).toEqual(['running', 'aborted: LockLostError', 'second ran'])
    run.proxy.resume()
    run.release.open()
    // Its claim was taken over: the finish leaves the other's claim alone.
    await expect(run.result).resolves.toMatchObject({ ran: true, value: 'first' })
  })

  it('answers that come late (a slow server): the signal aborts, and the claim, still renewed in Redis, keeps every other instance out', async () => {
    const run = await start()
    run.proxy.stall('replies')
    await until(() => run.events.length === 2, 'the local loss')
    expect(run.events[1]).toBe('aborted: LockLostError')
    await redis.admin().config('RESETSTAT')
    // Renewals go on after a deadline loss (the run still goes on, told to stop): counted.
    await until(async () => ((await commandsSinceReset(redis.admin())).evalsha ?? 0) >= 2, 'two more renewals')
    for (let i = 0; i < 3; i++)
      await expect(run.other.runOnce(run.name, () => 'second', { lockAtMostFor: AT_MOST })).resolves.toEqual({
        ran: false,
      })
    run.proxy.resume()
    run.release.open()
    await expect(run.result).resolves.toEqual({ ran: true, value: 'first' })
    await expect(run.other.runOnce(run.name, () => 'next', { lockAtMostFor: AT_MOST })).resolves.toEqual({
      ran: true,
      value: 'next',
    })
  })

  it('close() during a run aborts its signal and stops its renewals: the claim ends within lockAtMostFor', async () => {
    const run = await start()
    await run.runner.close()
    await until(() => run.events.length === 2, 'the run to be told to stop', 5_000)
    expect(run.events[1]).toBe('aborted: LockLostError')
    await run.runElsewhere()
    expect(run.events).toEqual(['running', 'aborted: LockLostError', 'second ran'])
    run.release.open()
    await expect(run.result).resolves.toMatchObject({ ran: true, value: 'first' })
  })
})
