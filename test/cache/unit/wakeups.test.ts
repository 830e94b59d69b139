/**
 * The cache's wake queue: woken waits resume in order, the first RESUMES_PER_TURN at once (in
 * the turn that woke them), the rest a bounded number per later turn of the event loop.
 */
import { describe, expect, it } from 'vitest'
import { RESUMES_PER_TURN, Wakeups } from '../../../src/cache/wakeups.js'

/** Resolves on the next turn of the event loop (after I/O, in the check phase). */
const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve))

describe('Wakeups', () => {
  it('a lone wake resumes in the same turn (microtask), before any setImmediate', async () => {
    const wakeups = new Wakeups()
    const seen: string[] = []
    setImmediate(() => seen.push('next turn'))
    wakeups.add({ resume: () => seen.push('resumed') })
    await Promise.resolve() // microtasks of this turn
    expect(seen).toEqual(['resumed'])
    await nextTurn()
    expect(seen).toEqual(['resumed', 'next turn'])
  })

  it('500 wakes at once resume in order, at most RESUMES_PER_TURN per turn, every one of them', async () => {
    const wakeups = new Wakeups()
    const COUNT = 500
    const resumed: number[] = []
    let turn = 0
    const turnOf: number[] = []
    for (let i = 0; i < COUNT; i++) wakeups.add({ resume: () => (resumed.push(i), turnOf.push(turn)) })
    for (let guard = 0; resumed.length < COUNT && guard < 100; guard++) {
      await nextTurn()
      turn++
    }
    expect(resumed).toEqual(Array.from({ length: COUNT }, (_, i) => i))
    const perTurn = new Map<number, number>()
    for (const t of turnOf) perTurn.set(t, (perTurn.get(t) ?? 0) + 1)
    expect(Math.max(...perTurn.values())).toBe(RESUMES_PER_TURN)
    expect(perTurn.get(0)).toBe(RESUMES_PER_TURN) // the first share without waiting for a turn
    expect(perTurn.size).toBe(Math.ceil(COUNT / RESUMES_PER_TURN))
    expect(wakeups.counts).toEqual({
      resumed: COUNT,
      turns: Math.ceil(COUNT / RESUMES_PER_TURN),
      mostInOneTurn: RESUMES_PER_TURN,
    })
  })

  it('a resume that throws does not stop the others', async () => {
    const wakeups = new Wakeups()
    const resumed: number[] = []
    wakeups.add({
      resume: () => {
        throw new Error('boom')
      },
    })
    wakeups.add({ resume: () => resumed.push(2) })
    await Promise.resolve()
    expect(resumed).toEqual([2])
  })
})
