import { BodyBuffer } from './body-buffer.js'
import type { CaptureBudget } from './capture-budget.js'
import type { ReleaseReason } from './exchange.js'
import { headerOf, type HeaderList } from './headers.js'
import type { ResponseSnapshot } from './stored-response.js'

/**
 * The capture of a response that a handler hands back as an object (Fastify's payload,
 * a Fetch `Response`, Koa's `ctx.body`), rather than writing it to a live response as
 * Express does (src/express/capture.ts). The same contract: the body is buffered up to
 * `maxBodyBytes`, within the shared capture budget and `timeoutMs`; past any of them,
 * or for a stream that says it never ends (`text/event-stream`), the capture is
 * released: what was buffered and the rest go to the client as one stream, nothing is
 * stored. A body that fails midway (`broken`) or is not as long as its `Content-Length`
 * (`truncated`) is released too, and never stored.
 */

/** A response body as handlers give it: bytes, text, or a stream of either (a Node Readable, a web ReadableStream). */
export type BodySource = Uint8Array | string | AsyncIterable<Uint8Array | string> | null | undefined

/** A response produced by the handler (the adapter's origin). */
export interface OriginResponse {
  status: number
  statusMessage?: string
  /** Every header of the response, including those set before the cache ran. */
  headers: HeaderList
  body: BodySource
}

export interface BodyCaptureLimits {
  maxBodyBytes: number
  /** From the handler's start: past it, the capture is released (`timeout`). */
  timeoutMs: number
  budget: CaptureBudget
}

export type BodyCapture =
  | { kind: 'complete'; response: ResponseSnapshot }
  /**
   * `response`: the handler's response as it will go to the client: its head, and a body
   * that yields what was buffered, then the rest (for `broken`, then fails as the body did).
   */
  | { kind: 'released'; reason: ReleaseReason; response: Promise<OriginResponse> }

type Chunk = Uint8Array | string

/** Buffers `pending`'s body within `limits` (see the module comment). */
export async function captureBody(
  pending: Promise<OriginResponse>,
  limits: BodyCaptureLimits,
  startedAt = Date.now(),
  /** Settles when buffering must stop at once (failing open): released as a timeout. */
  stop?: Promise<void>,
): Promise<BodyCapture> {
  let timer: NodeJS.Timeout | undefined
  const timedOut = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), Math.max(0, startedAt + limits.timeoutMs - Date.now()))
    timer.unref()
    void stop?.then(() => resolve('timeout'))
  })
  let reserved = 0
  const body = new BodyBuffer()
  try {
    const head = await Promise.race([pending, timedOut])
    if (head === 'timeout') return { kind: 'released', reason: 'timeout', response: pending }
    if (isEventStream(head.headers)) return { kind: 'released', reason: 'streamed', response: Promise.resolve(head) }
    const iterator = chunksOf(head.body)
    const release = (reason: ReleaseReason, next?: Promise<IteratorResult<Chunk>>, error?: unknown) => ({
      kind: 'released' as const,
      reason,
      response: Promise.resolve({ ...head, body: restOf(body.take(), iterator, next, error) }),
    })
    for (;;) {
      const next = iterator.next()
      let step: IteratorResult<Chunk> | 'timeout'
      try {
        step = await Promise.race([next, timedOut])
      } catch (error) {
        return release('broken', undefined, error)
      }
      if (step === 'timeout') return release('timeout', next)
      if (step.done) break
      body.append(step.value)
      if (body.length > limits.maxBodyBytes) return release('too-large')
      if (body.held !== reserved) {
        if (!limits.budget.reserve(body.held - reserved)) return release('over-budget')
        reserved = body.held
      }
    }
    if (!framedAsDeclared(head.status, head.headers, body.length)) return release('truncated')
    const response: ResponseSnapshot = {
      status: head.status,
      headers: head.headers,
      body: body.take(),
      requestTime: startedAt,
      responseTime: Date.now(),
    }
    if (head.statusMessage !== undefined) response.statusMessage = head.statusMessage
    return { kind: 'complete', response }
  } finally {
    clearTimeout(timer)
    limits.budget.giveBack(reserved)
  }
}

/** Drops a released body nobody will read (no client left): a stream is cancelled. */
export function discardBody(source: BodySource): void {
  if (source === null || source === undefined || typeof source === 'string' || source instanceof Uint8Array) return
  const iterator = source[Symbol.asyncIterator]()
  void iterator.return?.().catch(() => {})
}

function chunksOf(source: BodySource): AsyncIterator<Chunk> {
  if (source === null || source === undefined) return (async function* () {})()
  if (typeof source === 'string' || source instanceof Uint8Array)
    return (async function* () {
      yield source
    })()
  return source[Symbol.asyncIterator]()
}

/** What was buffered, then the pending step, then the rest of the stream. */
async function* restOf(
  buffered: Buffer,
  iterator: AsyncIterator<Chunk>,
  next: Promise<IteratorResult<Chunk>> | undefined,
  error: unknown,
): AsyncGenerator<Uint8Array> {
  if (buffered.length > 0) yield buffered
  if (error !== undefined) throw error
  try {
    let step = await (next ?? iterator.next())
    while (!step.done) {
      yield typeof step.value === 'string' ? Buffer.from(step.value) : step.value
      step = await iterator.next()
    }
  } finally {
    await iterator.return?.()
  }
}

function isEventStream(headers: HeaderList): boolean {
  return (headerOf(headers, 'content-type') ?? '').toLowerCase().startsWith('text/event-stream')
}

/** Is the body as long as its `Content-Length` says (when it says, and the status has a body)? */
function framedAsDeclared(status: number, headers: HeaderList, length: number): boolean {
  const declared = headerOf(headers, 'content-length')
  if (declared === undefined || status < 200 || status === 204 || status === 304) return true
  return /^\d+$/.test(declared.trim()) && Number(declared.trim()) === length
}
