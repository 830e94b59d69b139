import type { ServerResponse } from 'node:http'
import { BodyBuffer } from '../http/body-buffer.js'
import { notModifiedHeaders } from '../http/conditional.js'
import type { CaptureBudget } from '../http/capture-budget.js'
import { withoutFields, type HeaderList } from '../http/headers.js'
import { CapturedHead } from './captured-head.js'
import { Interception, type AnyFunction, type MethodName } from './interception.js'
import type { ResponseSnapshot } from '../http/stored-response.js'
import type { CaptureEnd, ReleaseReason } from '../http/exchange.js'

/**
 * Runs a handler's output into a buffer instead of the socket.
 *
 * The handler, and every middleware after cacheRoute, writes to the real `res`
 * object; Express gives us no other. So for the duration of a capture, the
 * response API of that object (`writeHead`, `write`, `end`, the header methods,
 * `statusCode`, `statusMessage`, `headersSent`) is shadowed by own properties that
 * write into this object instead. Middleware after us (compression) wraps the
 * shadows as it would wrap the real methods, so we capture exactly the bytes and
 * headers it produces. Middleware before us keeps its wrappers, which the replay
 * goes through.
 *
 * This is what lets the core call the loader in the background: the request whose
 * client was already answered with a stale response can still run the handler,
 * because nothing the handler does reaches that client.
 *
 * A capture ends one of two ways:
 * - `complete`: the handler called `end()`; the snapshot is in hand.
 * - `released`: buffering stopped (body over `maxBodyBytes`, a streaming response,
 *   `timeoutMs`, or the shared capture budget is spent). If the live client is still
 *   unanswered (`claimClient()`), what was buffered is flushed to it and the rest
 *   streams through ("passthrough"); otherwise the rest is dropped ("discard").
 *   Two releases mean the response is broken, and are never stored: `broken`, the
 *   connection closed before the handler ended (Express destroys the socket when a
 *   handler throws after its head went out), and `truncated`, the handler ended with
 *   a body whose length is not its `Content-Length` (RFC 9112 §6.3, RFC 9111 §3.3);
 *   that one is flushed to its client exactly as produced, as it would be uncached.
 */

export type { CaptureEnd, ReleaseReason } from '../http/exchange.js'

export interface CaptureOptions {
  /** Larger bodies are not buffered to the end. */
  maxBodyBytes: number
  /** Release after this long without `end()`. */
  timeoutMs: number
  /** Shared by the captures of many requests; a chunk that does not fit releases the capture. */
  budget: CaptureBudget
  /** Headers already set by middleware before us; the handler sees them, as it would. */
  initialHeaders: HeaderList
  /** Fields a released response never sends on (the route's own targeted cache-control field). */
  omitHeaders?: readonly string[]
  /** May a released capture stream to the live client? Called once, at release; true claims it. */
  claimClient(): boolean
  /** Added to the live response when a released capture streams to it (`X-Cache: BYPASS`), given why. */
  releasedHeaders?(reason: ReleaseReason): HeaderList
  /** Awaited before anything is flushed to the client (an unsafe method invalidates first). */
  beforeFlush?(status: number | undefined): Promise<void>
  /** Called once, synchronously, when the capture completes or is released, before anything reaches the client. */
  ended?(): void
  /**
   * Called once, synchronously, when the handler ended normally, right after `ended`: the
   * live client is answered here, before the handler's next statement runs (a second
   * `res.json` would make Express destroy the socket of a client answered later).
   */
  completed?(response: ResponseSnapshot): void
  /**
   * Do the client's validators, hidden from the handler, match this head? Then a released
   * capture answers the client 304 (as a replay would) and drops the body.
   */
  notModified?(status: number, headers: HeaderList): boolean
}

/**
 * `buffer`: capturing. `flushing`: released to the client, waiting for beforeFlush,
 * still buffering. `passthrough`: everything goes to the live response. `discard`:
 * released with no client, output dropped. `complete`: ended normally.
 */
type Mode = 'buffer' | 'flushing' | 'passthrough' | 'discard' | 'complete'

export class ResponseCapture {
  readonly done: Promise<CaptureEnd>
  private settle!: (end: CaptureEnd) => void
  private mode: Mode = 'buffer'
  /** The head the handler has written so far. */
  private readonly head: CapturedHead
  private ended = false
  private readonly body = new BodyBuffer()
  private readonly startedAt = Date.now()
  private releaseReason: ReleaseReason = 'streamed'
  /** Bytes taken from the budget, given back when buffering stops. */
  private reserved = 0
  private readonly onClose: (() => void) | undefined
  private readonly timer: NodeJS.Timeout
  /** Our shadows over the live response's API, and what puts it back. */
  private readonly interception: Interception
  private readonly upstream: Record<MethodName, AnyFunction>
  private readonly live: { statusCode: number; statusMessage: string }

  constructor(
    private readonly res: ServerResponse,
    private readonly options: CaptureOptions,
  ) {
    this.done = new Promise((resolve) => (this.settle = resolve))
    this.head = new CapturedHead(options.initialHeaders)
    this.interception = new Interception(res)
    this.upstream = this.interception.upstream
    this.live = this.interception.live
    this.install()
    this.timer = setTimeout(() => this.release('timeout'), options.timeoutMs)
    this.timer.unref()
    // A live response that closes before it finished was cut off (socket destroyed, client
    // gone): the handler will not end it, so stop at once rather than after timeoutMs.
    // One that had ended already (a background refresh after a stale answer) has no say.
    if (!res.writableEnded) {
      this.onClose = () => {
        if (!res.writableFinished) this.release('broken')
      }
      res.once('close', this.onClose)
    }
  }

  /** Still intercepting the live response (not released to it, not disposed)? */
  get intercepting(): boolean {
    return this.interception.installed && this.mode !== 'passthrough'
  }

  /** Everything goes straight to the live response. (A getter, so TypeScript does not narrow it across calls that change it.) */
  private get forwarding(): boolean {
    return this.mode === 'passthrough'
  }

  /** Did the handler end normally (the snapshot is in `done`)? */
  get completed(): boolean {
    return this.mode === 'complete'
  }

  /** Stop buffering (see the class comment). No-op unless still buffering. */
  release(reason: ReleaseReason): void {
    if (this.mode !== 'buffer') return
    this.stopBuffering()
    // A broken response's client is gone: claimed, so nothing else tries to answer it.
    this.releaseReason = reason
    const toClient = this.options.claimClient() && reason !== 'broken'
    this.options.ended?.()
    this.settle({ kind: 'released', reason, toClient })
    if (!toClient) {
      this.mode = 'discard'
      this.body.clear()
      return
    }
    this.mode = 'flushing'
    const gate = this.options.beforeFlush?.(this.head.committed ? this.head.status : undefined)
    if (!gate) return this.flush()
    gate.then(
      () => this.flush(),
      () => this.flush(),
    )
  }

  /**
   * Runs `fn` (a synchronous replay) against the live response with our shadows
   * lifted, then puts them back: the handler may still be running, e.g. after a
   * soft timeout answered its client with a stale response.
   */
  withoutInterception<T>(fn: () => T): T {
    if (!this.intercepting) return fn()
    return this.interception.lifted(fn)
  }

  /** Puts the live response's API back for good, dropping wrappers added after us. */
  dispose(): void {
    if (!this.intercepting) return
    this.stopBuffering()
    this.interception.remove()
  }

  /** No more buffering: the timer, the close watch and the budget are let go. */
  private stopBuffering(): void {
    clearTimeout(this.timer)
    if (this.onClose) this.res.off('close', this.onClose)
    this.options.budget.giveBack(this.reserved)
    this.reserved = 0
  }

  // ── the shadowed API ─────────────────────────────────────────────────────

  private install(): void {
    const shadows: Record<MethodName, AnyFunction> = {
      writeHead: (...args) => this.writeHead(args),
      write: (chunk, encoding, callback) => this.write(chunk, encoding, callback),
      end: (chunk, encoding, callback) => this.end(chunk, encoding, callback),
      flushHeaders: () => this.flushHeaders(),
      addTrailers: (trailers) =>
        this.forwarding ? this.upstream.addTrailers.call(this.res, trailers) : this.release('streamed'),
      setHeader: (name, value) =>
        this.headerCall(
          'setHeader',
          [name, value],
          () => (this.head.assertUnsent('set'), this.head.headers.set(name, value), this.res),
        ),
      appendHeader: (name, value) =>
        this.headerCall(
          'appendHeader',
          [name, value],
          () => (this.head.assertUnsent('set'), this.head.headers.append(name, value), this.res),
        ),
      setHeaders: (headers) =>
        this.headerCall('setHeaders', [headers], () => (this.head.setHeaders(headers), this.res)),
      getHeader: (name) => this.headerCall('getHeader', [name], () => this.head.headers.get(name)),
      getHeaders: () => this.headerCall('getHeaders', [], () => this.head.headers.toObject()),
      getHeaderNames: () => this.headerCall('getHeaderNames', [], () => this.head.headers.names()),
      hasHeader: (name) => this.headerCall('hasHeader', [name], () => this.head.headers.has(name)),
      removeHeader: (name) =>
        this.headerCall(
          'removeHeader',
          [name],
          () => (this.head.assertUnsent('remove'), this.head.headers.delete(name)),
        ),
    }
    this.interception.install(shadows, {
      statusCode: {
        configurable: true,
        enumerable: true,
        get: () => (this.forwarding ? this.live.statusCode : this.head.status),
        set: (code: number) => (this.forwarding ? (this.live.statusCode = code) : (this.head.status = code)),
      },
      statusMessage: {
        configurable: true,
        enumerable: true,
        get: () => (this.forwarding ? this.live.statusMessage : this.head.statusMessage),
        set: (message: string) =>
          this.forwarding ? (this.live.statusMessage = message) : (this.head.statusMessage = message),
      },
      headersSent: {
        configurable: true,
        enumerable: false,
        get: () => (this.forwarding ? this.interception.liveHeadersSent() : this.head.committed),
      },
    })
  }

  private headerCall<T>(name: MethodName, args: unknown[], captured: () => T): T {
    return this.forwarding ? this.upstream[name].apply(this.res, args) : captured()
  }

  private writeHead(args: unknown[]): ServerResponse {
    if (this.forwarding) return this.upstream.writeHead.apply(this.res, args)
    this.head.writeHead(args)
    if (this.head.isEventStream) this.release('streamed')
    return this.res
  }

  /** Like Node's implicit header: dispatched on the instance, so wrappers after us (on-headers) run. */
  private commitHead(): void {
    if (!this.head.committed) this.res.writeHead(this.res.statusCode)
  }

  private write(chunk: unknown, encoding?: unknown, callback?: unknown): boolean {
    if (this.forwarding) return this.upstream.write.call(this.res, chunk, encoding, callback)
    if (typeof encoding === 'function') [encoding, callback] = [undefined, encoding]
    if (this.ended) {
      if (typeof callback === 'function')
        process.nextTick(callback, Object.assign(new Error('write after end'), { code: 'ERR_STREAM_WRITE_AFTER_END' }))
      return false
    }
    this.commitHead()
    if (this.forwarding) return this.upstream.write.call(this.res, chunk, encoding, callback)
    this.append(chunk, encoding)
    if (typeof callback === 'function') process.nextTick(callback)
    return true
  }

  private end(chunk?: unknown, encoding?: unknown, callback?: unknown): ServerResponse {
    if (this.forwarding) return this.upstream.end.call(this.res, chunk, encoding, callback)
    if (typeof chunk === 'function') [chunk, encoding, callback] = [undefined, undefined, chunk]
    if (typeof encoding === 'function') [encoding, callback] = [undefined, encoding]
    if (this.ended) {
      if (typeof callback === 'function') process.nextTick(callback)
      return this.res
    }
    this.commitHead()
    if (this.forwarding) return this.upstream.end.call(this.res, chunk, encoding, callback)
    if (chunk !== undefined && chunk !== null) this.append(chunk, encoding)
    this.ended = true
    if (typeof callback === 'function') process.nextTick(callback)
    if (this.mode === 'buffer' && !this.head.framesBody(this.body.length)) this.release('truncated')
    else if (this.mode === 'buffer') this.complete()
    // append() may have released us, and a synchronous flush switched to passthrough.
    else if (this.forwarding) this.upstream.end.call(this.res)
    return this.res
  }

  private flushHeaders(): void {
    if (this.forwarding) return this.upstream.flushHeaders.call(this.res)
    this.commitHead()
    this.release('streamed')
    if (this.forwarding) this.upstream.flushHeaders.call(this.res)
  }

  private append(chunk: unknown, encoding: unknown): void {
    if (this.mode === 'discard') return
    if (typeof chunk !== 'string' && !(chunk instanceof Uint8Array))
      throw Object.assign(
        new TypeError('The "chunk" argument must be of type string or an instance of Buffer or Uint8Array'),
        { code: 'ERR_INVALID_ARG_TYPE' },
      )
    this.body.append(chunk, (typeof encoding === 'string' ? encoding : 'utf8') as BufferEncoding)
    if (this.mode !== 'buffer') return
    // The budget counts what the buffered body really holds (slabs included), not its payload.
    if (this.body.length > this.options.maxBodyBytes) this.release('too-large')
    else if (this.body.held === this.reserved) return
    else if (this.options.budget.reserve(this.body.held - this.reserved)) this.reserved = this.body.held
    else this.release('over-budget')
  }

  private complete(): void {
    this.stopBuffering()
    this.mode = 'complete'
    const response: ResponseSnapshot = {
      status: this.head.status,
      headers: this.head.headers.toList(),
      body: this.body.take(),
      requestTime: this.startedAt,
      responseTime: Date.now(),
    }
    if (this.head.statusMessage !== undefined) response.statusMessage = this.head.statusMessage
    this.options.ended?.()
    this.settle({ kind: 'complete', response })
    this.options.completed?.(response)
  }

  /** Released to the client: make the live response what the handler has produced so far, then stream. */
  private flush(): void {
    this.mode = 'passthrough'
    const { res, upstream } = this
    const names = upstream.getHeaderNames.call(res) as string[]
    for (const name of names) if (!this.head.headers.has(name)) upstream.removeHeader.call(res, name)
    if (this.head.committed && this.options.notModified?.(this.head.status, this.head.headers.toList())) {
      for (const [name, value] of [
        ...notModifiedHeaders(this.head.headers.toList()),
        ...(this.options.releasedHeaders?.(this.releaseReason) ?? []),
      ])
        upstream.setHeader.call(res, name, value)
      upstream.removeHeader.call(res, 'content-length')
      this.live.statusCode = 304
      upstream.writeHead.call(res, 304)
      upstream.end.call(res)
      this.mode = 'discard' // the rest of the body is not the client's
      this.body.clear()
      return
    }
    const own = withoutFields(this.head.headers.toList(), this.options.omitHeaders ?? [])
    for (const [name, value] of [...own, ...(this.options.releasedHeaders?.(this.releaseReason) ?? [])])
      upstream.setHeader.call(res, name, value)
    this.live.statusCode = this.head.status
    if (this.head.statusMessage !== undefined) this.live.statusMessage = this.head.statusMessage
    if (this.head.committed) upstream.writeHead.call(res, this.head.status)
    // What was buffered goes out as one write, however many writes made it.
    if (this.body.length > 0) upstream.write.call(res, this.body.take())
    if (this.ended) upstream.end.call(res)
  }
}
