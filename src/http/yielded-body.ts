import { BodyBuffer } from './body-buffer.js'
import type { CaptureBudget } from './capture-budget.js'
import type { ReleaseReason } from './exchange.js'

/**
 * Reading the body a handler yields as a value (Koa's `ctx.body`, a Nest handler's return
 * value) into one buffer, within the same bounds as the Express capture: `maxBodyBytes`
 * for this response, the capture budget for all captures at once, `handlerTimeout` for
 * the time. Past a bound the body is released: what was read and the rest are handed
 * back as one stream, for its client to get whole; nothing is stored.
 */

export type YieldedBody = Buffer | AsyncIterable<Uint8Array>

export type BodyRead =
  { kind: 'complete'; body: Buffer } | { kind: 'released'; reason: ReleaseReason; body: AsyncIterable<Uint8Array> }

export interface BodyBounds {
  maxBodyBytes: number
  budget: CaptureBudget
  /** When reading must stop (ms since the epoch). */
  deadline: number
}

export async function readYieldedBody(body: YieldedBody, bounds: BodyBounds): Promise<BodyRead> {
  if (Buffer.isBuffer(body)) {
    if (body.length > bounds.maxBodyBytes) return { kind: 'released', reason: 'too-large', body: streamOf(body) }
    return { kind: 'complete', body }
  }
  const buffer = new BodyBuffer()
  let reserved = 0
  const iterator = body[Symbol.asyncIterator]()
  try {
    for (;;) {
      const read = iterator.next()
      const step = await before(read, bounds.deadline)
      if (step === 'timeout') return released('timeout', buffer.take(), read, iterator)
      if (step.done) return { kind: 'complete', body: buffer.take() }
      const chunk = step.value
      const read2 = Promise.resolve(step)
      if (buffer.length + chunk.byteLength > bounds.maxBodyBytes)
        return released('too-large', buffer.take(), read2, iterator)
      const held = buffer.held
      buffer.append(chunk)
      const grown = buffer.held - held
      if (!bounds.budget.reserve(grown)) return released('over-budget', buffer.take(), undefined, iterator)
      reserved += grown
    }
  } catch (error) {
    buffer.clear()
    throw error
  } finally {
    bounds.budget.giveBack(reserved)
  }
}

/** What was read (`head`), then the result of `pending` (a read in flight), then the rest of `iterator`. */
function released(
  reason: ReleaseReason,
  head: Buffer,
  pending: Promise<IteratorResult<Uint8Array>> | undefined,
  iterator: AsyncIterator<Uint8Array>,
): BodyRead {
  async function* rest(): AsyncGenerator<Uint8Array> {
    if (head.length > 0) yield head
    if (pending) {
      const step = await pending
      if (step.done) return
      yield step.value
    }
    for (;;) {
      const step = await iterator.next()
      if (step.done) return
      yield step.value
    }
  }
  return { kind: 'released', reason, body: rest() }
}

/** `read`'s result, or 'timeout' once `deadline` passes (the read goes on, for the released stream). */
function before<T>(read: Promise<T>, deadline: number): Promise<T | 'timeout'> {
  const wait = deadline - Date.now()
  if (wait <= 0) return Promise.resolve('timeout')
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), wait)))
  return Promise.race([read, timeout]).finally(() => clearTimeout(timer))
}

/** A buffer as a one-chunk stream. */
export async function* streamOf(body: Buffer): AsyncGenerator<Uint8Array> {
  if (body.length > 0) yield body
}
