/**
 * LocalPermits, the per-process half of loaderConcurrency: at most `size` held, waiters served
 * in arrival order, a wait that runs out or aborts leaves the line and takes nothing.
 */
import { describe, expect, it } from 'vitest'
import { LocalPermits } from '../../../src/cache/local-permits.js'

const never = new AbortController().signal

describe('LocalPermits', () => {
  it('holds at most `size`; a given-back permit goes to the first waiter, in arrival order', async () => {
    const permits = new LocalPermits(2)
    expect(permits.tryTake()).toBe(true)
    expect(await permits.take(1_000, never)).toBe(true)
    expect(permits.tryTake()).toBe(false)
    const order: string[] = []
    const first = permits.take(10_000, never).then((taken) => order.push(`first:${taken}`))
    const second = permits.take(10_000, never).then((taken) => order.push(`second:${taken}`))
    permits.give()
    await first
    expect(order).toEqual(['first:true'])
    expect(permits.tryTake()).toBe(false) // the second still waits: nobody jumps the line
    permits.give()
    await second
    expect(order).toEqual(['first:true', 'second:true'])
    permits.give()
    permits.give()
    expect(permits.tryTake()).toBe(true)
    expect(permits.tryTake()).toBe(true)
    expect(permits.tryTake()).toBe(false)
  })

  it('a wait that runs out or aborts takes nothing and leaves the line', async () => {
    const permits = new LocalPermits(1)
    expect(permits.tryTake()).toBe(true)
    expect(await permits.take(0, never)).toBe(false)
    expect(await permits.take(20, never)).toBe(false)
    const aborting = new AbortController()
    const aborted = permits.take(10_000, aborting.signal)
    aborting.abort(new Error('lease lost'))
    await expect(aborted).rejects.toThrow('lease lost')
    await expect(permits.take(10, aborting.signal)).rejects.toThrow('lease lost')
    const next = permits.take(10_000, never)
    permits.give() // to `next`, not to the waits that left
    expect(await next).toBe(true)
    expect(permits.tryTake()).toBe(false)
    permits.give()
    expect(permits.tryTake()).toBe(true)
  })
})
