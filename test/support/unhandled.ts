/**
 * Fails the file if anything rejected unhandled while its tests ran: call inside a describe;
 * the listener is added before its first test and checked after its last.
 */
import { afterAll, beforeAll, expect } from 'vitest'

export function failOnUnhandledRejections(): void {
  const unhandled: unknown[] = []
  const onUnhandled = (reason: unknown) => unhandled.push(reason)
  beforeAll(() => void process.on('unhandledRejection', onUnhandled))
  afterAll(() => {
    process.off('unhandledRejection', onUnhandled)
    expect(unhandled).toEqual([])
  })
}
