import { afterEach, describe, expect, it } from 'vitest'
import { createCache, LoaderTimeoutError } from '../../src/index.js'
import { Deadlines } from '../../src/deadlines.js'
import { gate, sleep, until } from '../support/timing.js'

/** Counts the timers armed through the global setTimeout while `run` is going. */
function countTimers(): { armed(): number; restore(): void } {
  const original = globalThis.setTimeout
  let armed = 0
  globalThis.setTimeout = ((...args: Parameters<typeof setTimeout>) => (
    armed++,
    original(...args)
  )) as typeof setTimeout
  return { armed: () => armed, restore: () => void (globalThis.setTimeout = original) }
}

describe('per-caller deadlines', () => {
  let counter: ReturnType<typeof countTimers> | undefined
  afterEach(() => counter?.restore())

  it('1,000 callers joined to one flight with soft, hard and wait timeouts arm timers per flight, not per caller', async () => {
    const cache = createCache({ ttl: '1h', softTimeout: '1m', hardTimeout: '2m', waitTimeout: '3m' })
    const loading = gate()
    counter = countTimers()
    const calls = Array.from({ length: 1_000 }, () => cache.getOrLoad('hot', async () => (await loading.promise, 'v')))
    await sleep(0)
    const armed = counter.armed()
    counter.restore()
    loading.open()
    expect(await Promise.all(calls)).toEqual(Array(1_000).fill('v'))
    // One for the flight's deadlines, one for its load's lock.maxHold; a few to spare, not 3,000.
    expect(armed).toBeLessThanOrEqual(5)
    await cache.close()
  })

  it('each caller still times out on its own clock, counted from when it joined', async () => {
    const cache = createCache({ ttl: '1h', hardTimeout: 150 })
    const loading = gate()
    const loader = async () => (await loading.promise, 'v')
    const timedOutAfter = async (call: Promise<unknown>, joinedAt: number) => {
      const error = await call.catch((e: unknown) => e)
      expect(error).toBeInstanceOf(LoaderTimeoutError)
      return performance.now() - joinedAt
    }
    const firstJoined = performance.now()
    const first = timedOutAfter(cache.getOrLoad('slow', loader), firstJoined)
    await sleep(100)
    const secondJoined = performance.now()
    const second = timedOutAfter(cache.getOrLoad('slow', loader), secondJoined)
    // A deadline shared wrongly would answer the second caller at the first one's time (about 50 ms after it joined).
    expect(await first).toBeGreaterThanOrEqual(149)
    expect(await second).toBeGreaterThanOrEqual(149)
    loading.open()
    await cache.close()
  })
})

describe('Deadlines', () => {
  it('fires in time order on one timer, and nothing after clear()', async () => {
    const deadlines = new Deadlines()
    const fired: number[] = []
    const now = performance.now()
    for (const ms of [40, 10, 30, 20]) deadlines.add(now + ms, () => fired.push(ms))
    await until(() => fired.length === 4, 'the four deadlines to fire')
    expect(fired).toEqual([10, 20, 30, 40])
    deadlines.add(performance.now() + 10, () => fired.push(99))
    deadlines.clear()
    await sleep(40)
    expect(fired).toEqual([10, 20, 30, 40])
    expect(deadlines.size).toBe(0)
  })

  it('a cancelled deadline never fires; cancelled entries are compacted away, not kept until due', async () => {
    const deadlines = new Deadlines()
    const fired: number[] = []
    const now = performance.now()
    const cancels = Array.from({ length: 1_000 }, (_, i) => deadlines.add(now + 60_000 + i, () => fired.push(i)))
    const kept = deadlines.add(now + 20, () => fired.push(-1))
    for (const cancel of cancels) cancel()
    cancels[0]!() // twice: a no-op
    expect(deadlines.size).toBe(1)
    // Rebuilt once cancelled entries passed half of it, instead of holding 1,001 for a minute.
    expect((deadlines as unknown as { heap: unknown[] }).heap.length).toBeLessThan(200)
    await until(() => fired.length > 0, 'the kept deadline to fire')
    expect(fired).toEqual([-1])
    kept() // after it fired: a no-op
    expect(deadlines.size).toBe(0)
  })
})
