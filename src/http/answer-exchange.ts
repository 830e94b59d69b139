import type { IncomingHttpHeaders } from 'node:http'
import type { Cache } from '../cache/cache.js'
import type { CallOptions } from '../options.js'
import { reducedAcceptEncoding } from './accept-encoding.js'
import { currentAgeSeconds } from './age.js'
import type { Validators } from './conditional.js'
import {
  bypassHeaders,
  statusHeaders,
  type CaptureEnd,
  type ExchangeNote,
  type HttpExchange,
  type ReleaseReason,
  type RouteState,
  type RunHandlerOptions,
} from './exchange.js'
import { headerOf, type HeaderList } from './headers.js'
import { requestCallOptions, type RouteSettings } from './options.js'
import {
  replayPlan,
  bodyless,
  type CacheStatus,
  type Replayable,
  type ReplayOptions,
  type ReplayPlan,
} from './replay.js'
import { ownForm } from './stored-form.js'
import type { StoredResponse } from './stored-response.js'
import { readYieldedBody, streamOf, type YieldedBody } from './yielded-body.js'

/**
 * The engine's HttpExchange for frameworks whose handler yields its response as a value
 * that the framework sends after the cache returns: Koa (`ctx.body` after `await
 * next()`), NestJS (the handler's return value). The cache never writes to the socket:
 * it settles one Answer, which the adapter applies (sets `ctx`, returns a Response).
 */

/** What the handler produced, its body not read yet. `headers`: every field as it would go out. */
export interface YieldedResponse {
  status: number
  statusMessage?: string
  headers: HeaderList
  body: YieldedBody
}

/** How the client is answered; the adapter applies it, once. */
export type Answer =
  /** Send this (a stored response, or the handler's own, as replayPlan() prepared it). */
  | { kind: 'plan'; plan: ReplayPlan }
  /** The handler's response, released (too large, streamed, slow): sent as it is, body streamed. */
  | { kind: 'stream'; status: number; statusMessage?: string; headers: HeaderList; body: AsyncIterable<Uint8Array> }
  /** Run the handler uncached (fail open before it ran), with these status fields. */
  | { kind: 'pass'; headers: HeaderList }
  /** The handler threw: the framework's own error handling answers. */
  | { kind: 'error'; error: unknown }

/** What the adapter gives the exchange: how to run the handler, and the request it may present as origin. */
export interface YieldingHandler {
  /** Runs the handler (once) and resolves with what it produced; rejects if it threw. */
  produce(): Promise<YieldedResponse>
  /** The request's header fields, mutable (Node's `IncomingMessage.headers`). */
  readonly headers: IncomingHttpHeaders
  /** The method the handler sees, and setting it (HEAD is run as GET); omit if the framework routes by its own copy. */
  method?: { get(): string; set(method: string): void }
  /** The URL the handler answers, read before and after it ran (a rewrite after the cache); omit if it cannot change. */
  routedUrl?(): string
}

export class AnswerExchange<Req> implements HttpExchange<Req> {
  readonly head: boolean
  readonly validators: Validators
  readonly note: ExchangeNote = {}
  storedOwn: StoredResponse | undefined
  /** Settled once, with the client's answer. */
  readonly answered: Promise<Answer>
  private settle!: (answer: Answer) => void
  private claimed = false
  private passed = false
  private handlerRun: Promise<CaptureEnd> | undefined
  private thrown: { error: unknown } | undefined
  private requestOptions: CallOptions | undefined
  private routedAtStart: string | undefined
  private routedAtEnd: string | undefined
  private methodAtStart: string | undefined
  private methodAtEnd: string | undefined

  constructor(
    readonly raw: Req,
    readonly req: { headers: IncomingHttpHeaders; method: string },
    private readonly handler: YieldingHandler,
    readonly cache: Cache,
    readonly settings: RouteSettings<Req>,
    readonly route: RouteState,
    readonly key: string,
    /** Fields set before the cache ran (per request: never stored, set again on every hit). */
    readonly upstreamHeaders: HeaderList,
  ) {
    this.head = req.method.toUpperCase() === 'HEAD'
    this.validators = { ifNoneMatch: req.headers['if-none-match'], ifModifiedSince: req.headers['if-modified-since'] }
    this.answered = new Promise((resolve) => (this.settle = resolve))
  }

  /** Has the client been answered (or is it about to be)? */
  get isAnswered(): boolean {
    return this.claimed
  }

  get handlerStarted(): boolean {
    return this.handlerRun !== undefined
  }

  get callOptions(): CallOptions {
    return (this.requestOptions ??= requestCallOptions(this.settings, this.raw))
  }

  alteredSince(): boolean {
    if (this.routedAtEnd === undefined && this.methodAtEnd === undefined) return false
    return this.routedAtEnd !== this.routedAtStart || this.methodAtEnd !== this.methodAtStart
  }

  runHandler(options: RunHandlerOptions): Promise<CaptureEnd> {
    if (this.handlerRun) return this.handlerRun
    // The handler already ran uncached (fail open): nothing to capture, no client.
    if (this.passed) return Promise.resolve({ kind: 'released', reason: 'timeout', toClient: false })
    this.handlerRun = this.run(options)
    return this.handlerRun
  }

  private async run(options: RunHandlerOptions): Promise<CaptureEnd> {
    const restore = options.asOrigin ? this.presentAsOrigin(options.conditional) : () => {}
    this.routedAtStart = this.handler.routedUrl?.()
    this.methodAtStart = this.handler.method?.get()
    const requestTime = Date.now()
    const deadline = requestTime + this.settings.handlerTimeout
    const ended = () => {
      this.routedAtEnd = this.handler.routedUrl?.()
      this.methodAtEnd = this.handler.method?.get()
      restore()
    }
    let produced: YieldedResponse
    try {
      const producing = this.handler.produce()
      const first = await beforeDeadline(producing, deadline)
      if (first === 'timeout') {
        ended()
        // Its client gets it whenever it comes, uncached; the waiters are released now.
        producing.then(
          (late) => this.release('timeout', late, late.body, options),
          (error: unknown) => this.claim({ kind: 'error', error }),
        )
        return { kind: 'released', reason: 'timeout', toClient: true }
      }
      produced = first
    } catch (error) {
      ended()
      this.thrown = { error }
      return { kind: 'released', reason: 'broken', toClient: false }
    }
    ended()
    if (/^\s*text\/event-stream/i.test(headerOf(produced.headers, 'content-type') ?? ''))
      return this.release('streamed', produced, produced.body, options)
    let read
    try {
      read = await readYieldedBody(produced.body, {
        maxBodyBytes: this.settings.maxBodyBytes,
        budget: this.settings.captureBudget,
        deadline,
      })
    } catch (error) {
      this.thrown = { error }
      return { kind: 'released', reason: 'broken', toClient: false }
    }
    if (read.kind === 'released') return this.release(read.reason, produced, read.body, options)
    const length = headerOf(produced.headers, 'content-length')
    if (length !== undefined && !bodyless(produced.status) && Number(length) !== read.body.length)
      return this.release('truncated', produced, read.body, options)
    const response = { ...produced, body: read.body, requestTime, responseTime: Date.now() }
    options.completed?.(response)
    return { kind: 'complete', response }
  }

  /** The handler's response goes to its client as it is, streamed; nothing is stored. */
  private async release(
    reason: ReleaseReason,
    produced: YieldedResponse,
    body: YieldedBody,
    options: RunHandlerOptions,
  ): Promise<CaptureEnd> {
    let headers = produced.headers
    if (options.asOrigin) {
      this.note.detail ??= reason
      headers = [...headers, ...this.statusHeaders('BYPASS')]
    }
    await options.beforeFlush?.(produced.status)
    const answer: Extract<Answer, { kind: 'stream' }> = {
      kind: 'stream',
      status: produced.status,
      headers,
      body: Buffer.isBuffer(body) ? streamOf(body) : body,
    }
    if (produced.statusMessage !== undefined) answer.statusMessage = produced.statusMessage
    return { kind: 'released', reason, toClient: this.claim(answer) }
  }

  async failOpen(): Promise<void> {
    if (!this.handlerRun) {
      this.passed = true
      this.claim({ kind: 'pass', headers: bypassHeaders(this.settings, this.note.detail) })
      return
    }
    const end = await this.handlerRun
    if (this.thrown) {
      this.claim({ kind: 'error', error: this.thrown.error })
      return
    }
    if (end.kind !== 'complete') return
    this.replayOwn(ownForm(end.response, this.upstreamHeaders), 'BYPASS')
  }

  /**
   * Answers with the response about to be stored. What middleware above the cache adds
   * after it (Koa's after `await next()`) cannot be seen here: judged on what the handler made.
   */
  answerBeforeStoring(stored: StoredResponse, status: CacheStatus = 'MISS'): boolean | undefined {
    if (this.claimed) return undefined
    return this.replayStored(stored, status)
  }

  sentStorable(): boolean {
    return true
  }

  replayStored(stored: StoredResponse, status: CacheStatus): boolean {
    const age = currentAgeSeconds(stored.initialAgeMs ?? 0, stored.storedAt)
    return this.answerWith(stored, {
      head: this.head,
      validators: this.validators,
      ...((status !== 'MISS' && status !== 'REVALIDATED') || age > 0 ? { ageSeconds: age } : {}),
      statusHeaders: this.statusHeaders(status, stored),
    })
  }

  replayOwn(response: Replayable, status: CacheStatus | undefined, conditional = true): boolean {
    return this.answerWith(response, {
      head: this.head,
      ...(conditional ? { validators: this.validators } : {}),
      ...(status ? { statusHeaders: this.statusHeaders(status) } : {}),
    })
  }

  reportError(error: unknown): void {
    try {
      this.settings.onError(error, this.raw)
    } catch {
      // an observer that throws must not break the request
    }
  }

  private statusHeaders(status: CacheStatus, stored?: StoredResponse): HeaderList {
    return statusHeaders(this.settings, this.note, status, stored)
  }

  private answerWith(response: Replayable, options: ReplayOptions): boolean {
    if (this.claimed) return false
    const omit = this.settings.targetedFields.filter((name) => name !== 'cdn-cache-control')
    return this.claim({ kind: 'plan', plan: replayPlan(response, { ...options, omit }) })
  }

  private claim(answer: Answer): boolean {
    if (this.claimed) return false
    this.claimed = true
    this.settle(answer)
    return true
  }

  /** Hides what a cache's fetch would not send (see the Express exchange); returns the undo. */
  private presentAsOrigin(conditional: { ifNoneMatch?: string; ifModifiedSince?: string } = {}): () => void {
    const headers = this.handler.headers
    const method = this.handler.method?.get()
    const hidden: Array<[string, string | string[] | undefined]> = []
    for (const name of ['if-none-match', 'if-modified-since']) {
      if (headers[name] !== undefined) {
        hidden.push([name, headers[name]])
        delete headers[name]
      }
    }
    if (conditional.ifNoneMatch !== undefined) headers['if-none-match'] = conditional.ifNoneMatch
    if (conditional.ifModifiedSince !== undefined) headers['if-modified-since'] = conditional.ifModifiedSince
    if (method?.toUpperCase() === 'HEAD') this.handler.method?.set('GET')
    const acceptEncoding = headers['accept-encoding']
    const coding = reducedAcceptEncoding(acceptEncoding)
    if (coding !== undefined) headers['accept-encoding'] = coding
    return () => {
      if (method !== undefined) this.handler.method?.set(method)
      delete headers['if-none-match']
      delete headers['if-modified-since']
      for (const [name, value] of hidden) headers[name] = value
      if (acceptEncoding === undefined) delete headers['accept-encoding']
      else headers['accept-encoding'] = acceptEncoding
    }
  }
}

function beforeDeadline<T>(promise: Promise<T>, deadline: number): Promise<T | 'timeout'> {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<'timeout'>(
    (resolve) => (timer = setTimeout(() => resolve('timeout'), Math.max(0, deadline - Date.now()))),
  )
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer))
}
