import type { Cache } from '../cache/cache.js'
import type { CallOptions } from '../options.js'
import { reducedAcceptEncoding } from './accept-encoding.js'
import { currentAgeSeconds } from './age.js'
import { captureBody, discardBody, type BodySource, type OriginResponse } from './body-capture.js'
import { isNotModified, notModifiedHeaders, type Validators } from './conditional.js'
import {
  bypassHeaders,
  statusHeaders,
  type CaptureEnd,
  type ExchangeNote,
  type HttpExchange,
  type RouteState,
  type RunHandlerOptions,
} from './exchange.js'
import { withoutFields, type HeaderList } from './headers.js'
import { requestCallOptions, type RouteSettings } from './options.js'
import { replayPlan, type CacheStatus, type Replayable, type ReplayOptions } from './replay.js'
import { headerValue, type HttpHeaders, type HttpRequest } from './request.js'
import { ownForm } from './stored-form.js'
import type { ResponseSnapshot, StoredResponse } from './stored-response.js'

/**
 * The request a handler is run with: as the client sent it, or, run as the cache's
 * fetch, HEAD made GET, validators hidden (or the stored response's, to revalidate it),
 * Accept-Encoding reduced. `background`: the client was answered already (from the cache),
 * so the handler must run detached from it (Fastify: `inject`; a fetch handler: call it).
 */
export interface OriginRequest {
  method: string
  url: string
  headers: HttpHeaders
  background: boolean
}

/** Runs the route's handler for `request` and gives back its response (the adapter's side of the contract). */
export type Origin = (request: OriginRequest) => Promise<OriginResponse>

/**
 * What the adapter sends its client: remove the fields named in `remove` (set before the
 * cache ran, removed by the handler), set `headers` in order (a later field of the same
 * name replaces the earlier), then the status and body. `body` undefined: none (a 304,
 * a 204, HEAD gets an empty buffer with the GET's `Content-Length`).
 */
export interface HttpAnswer {
  status: number
  statusMessage?: string
  remove: string[]
  headers: HeaderList
  body: BodySource
}

/**
 * One request through the cache for an adapter whose handler hands back a response
 * object (see exchange.ts for the rules). The client's answer is `answer`, settled once.
 */
export class OriginExchange<Req> implements HttpExchange<Req> {
  readonly head: boolean
  readonly validators: Validators
  readonly note: ExchangeNote = {}
  storedOwn: StoredResponse | undefined
  /** Resolves with what the client gets. */
  readonly answer: Promise<HttpAnswer>
  private settle!: (answer: HttpAnswer) => void
  private clientClaimed = false
  private handlerRun: Promise<CaptureEnd> | undefined
  private requestOptions: CallOptions | undefined
  /** Called by failOpen while the handler runs: buffering stops at once, the rest streams to the client. */
  private releaseNow: (() => void) | undefined

  constructor(
    readonly cache: Cache,
    readonly settings: RouteSettings<Req>,
    readonly route: RouteState,
    readonly key: string,
    private readonly raw: Req,
    private readonly request: HttpRequest,
    private readonly origin: Origin,
    readonly upstreamHeaders: HeaderList = [],
  ) {
    this.head = request.method.toUpperCase() === 'HEAD'
    this.validators = {
      ifNoneMatch: headerValue(request.headers, 'if-none-match'),
      ifModifiedSince: headerValue(request.headers, 'if-modified-since'),
    }
    this.answer = new Promise((resolve) => (this.settle = resolve))
  }

  get req(): { headers: HttpHeaders } {
    return this.request
  }

  get handlerStarted(): boolean {
    return this.handlerRun !== undefined
  }

  get callOptions(): CallOptions {
    return (this.requestOptions ??= requestCallOptions(this.settings, this.raw))
  }

  private get ownTargetedFields(): string[] {
    return this.settings.targetedFields.filter((name) => name !== 'cdn-cache-control')
  }

  alteredSince(): boolean {
    return false
  }

  runHandler(options: RunHandlerOptions): Promise<CaptureEnd> {
    this.handlerRun ??= this.run(options)
    return this.handlerRun
  }

  private async run(options: RunHandlerOptions): Promise<CaptureEnd> {
    // The core may call a background loader before our own call has returned the stale
    // response we are about to answer with: one macrotask tells which it is.
    await new Promise((resolve) => setImmediate(resolve))
    const background = this.clientClaimed
    const startedAt = Date.now()
    let pending: Promise<OriginResponse>
    try {
      pending = Promise.resolve(this.origin(this.originRequest(options, background)))
    } catch (error) {
      pending = Promise.reject(error)
    }
    const stop = new Promise<void>((resolve) => (this.releaseNow = resolve))
    const capture = await captureBody(
      pending,
      {
        maxBodyBytes: this.settings.maxBodyBytes,
        timeoutMs: this.settings.handlerTimeout,
        budget: this.settings.captureBudget,
      },
      startedAt,
      stop,
    ).catch((error: unknown) => ({ kind: 'failed' as const, error }))
    this.releaseNow = undefined
    if (capture.kind === 'failed') {
      // The handler threw: an uncached route would answer with the framework's error handling,
      // which is the adapter's. Treated as a 500 (a failure, never stored), unless it is an
      // HTTP error with a 4xx status (an answer: never stored, never covered by a stale one).
      const status = thrownClientError(capture.error) ?? 500
      return this.complete(options, { status, headers: [], body: Buffer.alloc(0) }, startedAt, capture.error)
    }
    if (capture.kind === 'complete') {
      options.completed?.(capture.response)
      return capture
    }
    const toClient = this.claimClient()
    if (!toClient) {
      void capture.response.then((response) => discardBody(response.body)).catch(() => {})
      return { kind: 'released', reason: capture.reason, toClient }
    }
    this.note.detail ??= capture.reason
    void this.sendReleased(capture.response, options)
    return { kind: 'released', reason: capture.reason, toClient }
  }

  /**
   * A handler that threw: completed as a 500, so the flows treat it as the failure it is,
   * or as the 4xx of an HTTP error, marked `thrown`; the error is kept for the adapter.
   */
  private complete(options: RunHandlerOptions, head: OriginResponse, startedAt: number, error: unknown): CaptureEnd {
    this.handlerError = error
    const response: ResponseSnapshot = {
      status: head.status,
      headers: head.headers,
      body: Buffer.alloc(0),
      requestTime: startedAt,
    }
    if (head.status < 500) response.thrown = true
    options.completed?.(response)
    return { kind: 'complete', response }
  }

  /** The error the handler threw, when it did: the adapter rethrows it to its framework's error handling. */
  handlerError: unknown

  /** A released response to its client, after `beforeFlush` (an unsafe method invalidates first). */
  private async sendReleased(pending: Promise<OriginResponse>, options: RunHandlerOptions): Promise<void> {
    let response: OriginResponse
    try {
      response = await pending
    } catch (error) {
      this.handlerError = error
      this.settle(this.plainAnswer({ status: 500, headers: [], body: undefined }, []))
      return
    }
    await options.beforeFlush?.(response.status).catch(() => {})
    const released = statusHeaders(this.settings, this.note, 'BYPASS')
    if (options.asOrigin && isNotModified(this.validators, response.status, response.headers)) {
      discardBody(response.body)
      this.settle({
        status: 304,
        remove: ['content-length'],
        headers: [...notModifiedHeaders(response.headers), ...released],
        body: undefined,
      })
      return
    }
    this.settle(this.plainAnswer(response, released))
  }

  private plainAnswer(response: OriginResponse, extra: HeaderList): HttpAnswer {
    const answer: HttpAnswer = {
      status: response.status,
      remove: [],
      headers: [...withoutFields(response.headers, this.ownTargetedFields), ...extra],
      body: response.body,
    }
    if (response.statusMessage !== undefined) answer.statusMessage = response.statusMessage
    return answer
  }

  /** The handler's own response for a request passed by, with `X-Cache: BYPASS`. */
  private async passedBy(pending: Promise<OriginResponse>, reason: string | undefined): Promise<HttpAnswer> {
    try {
      return this.plainAnswer(await pending, bypassHeaders(this.settings, reason))
    } catch (error) {
      this.handlerError = error
      return this.plainAnswer({ status: 500, headers: [], body: undefined }, [])
    }
  }

  async failOpen(): Promise<void> {
    if (!this.handlerRun) {
      if (!this.claimClient()) return
      this.handlerRun = Promise.resolve({ kind: 'released', reason: 'timeout', toClient: true })
      let pending: Promise<OriginResponse>
      try {
        pending = Promise.resolve(this.origin({ ...this.request, background: false }))
      } catch (error) {
        pending = Promise.reject(error)
      }
      this.settle(await this.passedBy(pending, this.note.detail))
      return
    }
    this.releaseNow?.()
    const end = await this.handlerRun
    if (end.kind !== 'complete') return
    this.replayOwn(ownForm(end.response, this.upstreamHeaders), 'BYPASS')
  }

  answerBeforeStoring(stored: StoredResponse, status: CacheStatus = 'MISS'): boolean | undefined {
    if (this.clientClaimed) return undefined
    return this.replayStored(stored, status)
  }

  /** The answer is handed back whole: what goes out is what was judged. */
  sentStorable(): boolean {
    return true
  }

  replayStored(stored: StoredResponse, status: CacheStatus): boolean {
    const age = currentAgeSeconds(stored.initialAgeMs ?? 0, stored.storedAt)
    return this.send(stored, {
      head: this.head,
      validators: this.validators,
      ...((status !== 'MISS' && status !== 'REVALIDATED') || age > 0 ? { ageSeconds: age } : {}),
      statusHeaders: statusHeaders(this.settings, this.note, status, stored),
    })
  }

  replayOwn(response: Replayable, status: CacheStatus | undefined, conditional = true): boolean {
    return this.send(response, {
      head: this.head,
      ...(conditional ? { validators: this.validators } : {}),
      ...(status ? { statusHeaders: statusHeaders(this.settings, this.note, status) } : {}),
    })
  }

  reportError(error: unknown): void {
    try {
      this.settings.onError(error, this.raw)
    } catch {
      // an observer that throws must not break the request
    }
  }

  private send(response: Replayable, options: ReplayOptions): boolean {
    if (!this.claimClient()) return false
    const plan = replayPlan(response, { ...options, omit: this.ownTargetedFields })
    const answer: HttpAnswer = { status: plan.status, remove: plan.remove, headers: plan.headers, body: plan.body }
    if (plan.statusMessage !== undefined) answer.statusMessage = plan.statusMessage
    this.settle(answer)
    return true
  }

  private claimClient(): boolean {
    if (this.clientClaimed) return false
    this.clientClaimed = true
    return true
  }

  /** The request the handler is run with (see OriginRequest). */
  private originRequest(options: RunHandlerOptions, background: boolean): OriginRequest {
    if (!options.asOrigin)
      return { method: this.request.method, url: this.request.url, headers: this.request.headers, background }
    const headers: HttpHeaders = { ...this.request.headers }
    delete headers['if-none-match']
    delete headers['if-modified-since']
    const { conditional } = options
    if (conditional?.ifNoneMatch !== undefined) headers['if-none-match'] = conditional.ifNoneMatch
    if (conditional?.ifModifiedSince !== undefined) headers['if-modified-since'] = conditional.ifModifiedSince
    const coding = reducedAcceptEncoding(headerValue(headers, 'accept-encoding'))
    if (coding !== undefined) headers['accept-encoding'] = coding
    const method = this.request.method.toUpperCase() === 'HEAD' ? 'GET' : this.request.method
    return { method, url: this.request.url, headers, background }
  }
}

/**
 * The 4xx status of an HTTP error a handler threw, else undefined: Nest's HttpException
 * (`getStatus()`), or an http-errors error (Koa's `ctx.throw`: `status` with `expose`).
 * An error that merely carries a status (an HTTP client's, for the upstream's 404 or
 * 429) is the failure of a call, which a stale response may cover.
 */
function thrownClientError(error: unknown): number | undefined {
  if (typeof error !== 'object' || error === null) return undefined
  const { status, expose, getStatus } = error as { status?: unknown; expose?: unknown; getStatus?: unknown }
  const found =
    typeof getStatus === 'function'
      ? (getStatus as () => unknown).call(error)
      : typeof expose === 'boolean'
        ? status
        : undefined
  return typeof found === 'number' && Number.isInteger(found) && found >= 400 && found < 500 ? found : undefined
}
