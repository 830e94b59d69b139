import type {
  NextFunctionLike as NextFunction,
  RequestLike as Request,
  ResponseLike as Response,
} from './http-types.js'
import type { Cache } from '../cache/cache.js'
import { reducedAcceptEncoding } from '../http/accept-encoding.js'
import { currentAgeSeconds } from '../http/age.js'
import { ResponseCapture } from './capture.js'
import { isNotModified, type Validators } from '../http/conditional.js'
import {
  bypassHeaders,
  statusHeaders,
  type CaptureEnd,
  type ExchangeNote,
  type HttpExchange,
  type RouteState,
  type RunHandlerOptions,
} from '../http/exchange.js'
import { HeaderMap, type HeaderList } from '../http/headers.js'
import { routedTargets, sameRoutedUrl } from './routing.js'
import type { CallOptions } from '../options.js'
import { requestCallOptions, type RouteSettings as EngineRouteSettings } from '../http/options.js'
import type { CacheStatus, Replayable } from '../http/replay.js'
import { replay } from './replay.js'
import { forbiddenBy } from '../http/response-policy.js'
import { ownForm } from '../http/stored-form.js'
import type { StoredResponse } from '../http/stored-response.js'

type RouteSettings = EngineRouteSettings<Request>

/**
 * One request through cacheRoute (the engine's HttpExchange over Express's live `res`): its `next` (the handler), its live client, and what
 * the middleware learned along the way. The rules it enforces:
 * - `next` runs at most once: the handler runs for this request once, captured, or
 *   once uncached (fail open), never both;
 * - the client is answered at most once: by a replay, or by a released capture
 *   streaming to it, whichever claims it first.
 */
export class Exchange implements HttpExchange<Request> {
  readonly head: boolean
  /** The client's validators, saved before the capture hides them from the handler. */
  readonly validators: Validators
  /** Headers set by middleware before cacheRoute: per-request, so never stored. */
  readonly upstreamHeaders: HeaderList
  /** Why this request went forward (or waited), for `Cache-Status`: set along the way. */
  readonly note: ExchangeNote = {}
  /** Set by the loader when this request's handler produced a stored response (`X-Cache: MISS`). */
  storedOwn: StoredResponse | undefined
  private handlerRun: Promise<CaptureEnd> | undefined
  private capture: ResponseCapture | undefined
  private nextCalled = false
  private clientClaimed = false
  /** The URL the router matched, when the request reached us and when the handler finished (see key.ts). */
  private readonly routedAtStart: string[]
  private routedAtEnd: string[] | undefined
  /** The method the handler was run with, and the one it had when it finished (method-override). */
  private methodAtStart: string | undefined
  private methodAtEnd: string | undefined

  constructor(
    readonly req: Request,
    readonly res: Response,
    private readonly next: NextFunction,
    readonly cache: Cache,
    readonly settings: RouteSettings,
    readonly route: RouteState,
    readonly key: string,
  ) {
    this.head = req.method.toUpperCase() === 'HEAD'
    this.validators = { ifNoneMatch: req.headers['if-none-match'], ifModifiedSince: req.headers['if-modified-since'] }
    this.upstreamHeaders = HeaderMap.from(res.getHeaders()).toList()
    this.routedAtStart = routedTargets(req)
  }

  /** The route's own targeted field (RFC 9213): for this cache only, never sent on. */
  private get ownTargetedFields(): string[] {
    return this.settings.targetedFields.filter((name) => name !== 'cdn-cache-control')
  }

  private requestOptions: CallOptions | undefined
  /** The options of this request's cache calls (the route's, and the request's tags); throws on bad tags. */
  get callOptions(): CallOptions {
    return (this.requestOptions ??= requestCallOptions(this.settings, this.req))
  }

  /**
   * Did middleware after us change what the handler answered while it ran: rewrite the URL
   * the router matched (an SPA fallback), or change the method (method-override turning a
   * GET into a POST or DELETE)? Then its response belongs to another request.
   */
  alteredSince(): boolean {
    if (this.routedAtEnd === undefined) return false
    return !sameRoutedUrl(this.routedAtStart, this.routedAtEnd) || this.methodAtEnd !== this.methodAtStart
  }

  /** Has this request's handler been started (captured)? */
  get handlerStarted(): boolean {
    return this.handlerRun !== undefined
  }

  /**
   * Runs the handler for this request, once, into a buffer (see capture.ts). With
   * `asOrigin`, the handler sees the request a cache fetches with: HEAD becomes GET
   * (so the body exists to store), the client's validators are hidden (so it answers a
   * full 200 worth storing; the cache answers them), and Accept-Encoding is reduced.
   */
  runHandler(options: RunHandlerOptions): Promise<CaptureEnd> {
    if (this.handlerRun) return this.handlerRun
    // next() already ran uncached (fail open): there is nothing to capture, and no client.
    if (this.nextCalled) return Promise.resolve({ kind: 'released', reason: 'timeout', toClient: false })
    const restoreRequest = options.asOrigin ? this.presentAsOrigin(options.conditional) : () => {}
    this.methodAtStart = this.req.method
    this.capture = new ResponseCapture(this.res, {
      maxBodyBytes: this.settings.maxBodyBytes,
      timeoutMs: this.settings.handlerTimeout,
      initialHeaders: this.upstreamHeaders,
      omitHeaders: this.ownTargetedFields,
      claimClient: () => this.claimClient(),
      ...(options.asOrigin
        ? {
            releasedHeaders: (reason: string) => {
              this.note.detail ??= reason
              return this.statusHeaders('BYPASS')
            },
          }
        : {}),
      ...(options.beforeFlush ? { beforeFlush: options.beforeFlush } : {}),
      ...(options.completed ? { completed: options.completed } : {}),
      // The validators were hidden: a released response answers them as a replay would.
      ...(options.asOrigin
        ? { notModified: (status: number, headers: HeaderList) => isNotModified(this.validators, status, headers) }
        : {}),
      // Completed or released, the request is the client's again: a released response
      // goes on to its client (a logger's 'finish' sees HEAD, not GET), and nothing more is stored.
      ended: () => {
        this.routedAtEnd = routedTargets(this.req)
        this.methodAtEnd = this.req.method
        restoreRequest()
      },
      budget: this.settings.captureBudget,
    })
    this.handlerRun = this.capture.done
    this.nextCalled = true
    this.next()
    return this.handlerRun
  }

  /**
   * Fail open: the request is answered as if the route were uncached. If its handler
   * has not run, it runs now, uncached. If it is running, what it sends from now on
   * streams to the client. If it has finished, its response is sent.
   */
  async failOpen(): Promise<void> {
    if (!this.handlerRun) {
      this.nextCalled = true
      this.clientClaimed = true
      passThrough(this.res, this.next, this.settings, this.note.detail)
      return
    }
    this.capture?.release('timeout')
    const end = await this.handlerRun
    if (end.kind !== 'complete') return
    this.replayOwn(ownForm(end.response, this.upstreamHeaders), 'BYPASS')
  }

  /**
   * Answers the client with the response about to be stored, then says whether it may
   * still be stored: on-headers hooks of middleware before cacheRoute have now run (see
   * RouteState). `undefined`: the client was answered already, nothing to learn.
   */
  answerBeforeStoring(stored: StoredResponse, status: CacheStatus = 'MISS'): boolean | undefined {
    if (this.clientClaimed) return undefined
    return this.replayStored(stored, status) && this.sentStorable(stored.headers)
  }

  /**
   * After this request's (storable) response went out: do the headers sent still allow
   * storing it? What forbids it now was added as the head went out; remembered for the route.
   */
  sentStorable(own: HeaderList): boolean {
    // The route's own targeted field was judged but not sent (replay omits it): judge it again.
    const kept = own.filter(([name]) => this.ownTargetedFields.includes(name.toLowerCase()))
    const sent = HeaderMap.from(this.res.getHeaders()).toList()
    if (forbiddenBy([...sent, ...kept], this.settings.targetedFields) === undefined) return true
    this.route.upstreamForbidsStoring = true
    return false
  }

  /**
   * Sends a stored response, with the validators answered, and its current `Age` (RFC
   * 9111 §4.2.3: its age when stored plus its time in the cache). This request's own
   * (`MISS`) gets one only if it was already a second old (the handler sent `Age`): a
   * response made for this request has no age (RFC 9111 §5.1).
   * False if the client was answered already, or the replay failed.
   */
  replayStored(stored: StoredResponse, status: CacheStatus): boolean {
    const age = currentAgeSeconds(stored.initialAgeMs ?? 0, stored.storedAt)
    return this.answer(stored, {
      head: this.head,
      validators: this.validators,
      ...((status !== 'MISS' && status !== 'REVALIDATED') || age > 0 ? { ageSeconds: age } : {}),
      statusHeaders: this.statusHeaders(status, stored),
    })
  }

  /** Sends what this request's own handler produced (`headers` already prepared, see stored-form.ts). */
  replayOwn(response: Replayable, status: CacheStatus | undefined, conditional = true): boolean {
    return this.answer(response, {
      head: this.head,
      ...(conditional ? { validators: this.validators } : {}),
      ...(status ? { statusHeaders: this.statusHeaders(status) } : {}),
    })
  }

  reportError(error: unknown): void {
    reportError(this.settings, error, this.req)
  }

  /**
   * `X-Cache` and `Cache-Status` (RFC 9211) for an answer, as the route enables them;
   * `note` says why the request went forward, and `stored` gives a hit its ttl.
   */
  statusHeaders(status: CacheStatus, stored?: StoredResponse): HeaderList {
    return statusHeaders(this.settings, this.note, status, stored)
  }

  private claimClient(): boolean {
    if (this.clientClaimed) return false
    this.clientClaimed = true
    return true
  }

  /**
   * Answers the client, unless it was answered already. A replay that throws (an
   * upstream hook, a header Node refuses) has claimed the client, so nothing else
   * will answer it: it gets a bare 502, or, if the head already went out, a cut connection.
   */
  private answer(response: Replayable, options: Parameters<typeof replay>[2]): boolean {
    if (!this.claimClient()) return false
    const capture = this.capture
    const send = () => {
      try {
        replay(this.res, response, { ...options, omit: this.ownTargetedFields })
        return true
      } catch (error) {
        this.reportError(error)
        abandon(this.res)
        return false
      }
    }
    if (capture?.completed) {
      capture.dispose()
      return send()
    }
    // The handler is still running (the core answered early, e.g. a soft timeout
    // served stale): lift the capture just for this synchronous replay.
    if (capture?.intercepting) return capture.withoutInterception(send)
    return send()
  }

  /** Hides what a cache's fetch would not send; returns the undo. */
  private presentAsOrigin(conditional: { ifNoneMatch?: string; ifModifiedSince?: string } = {}): () => void {
    const { req } = this
    const method = req.method
    const hidden: Array<[string, string | string[] | undefined]> = []
    // If-Match, If-Unmodified-Since and Range (with If-Range) never get here: such requests pass by (storability.ts).
    for (const name of ['if-none-match', 'if-modified-since']) {
      if (req.headers[name] !== undefined) {
        hidden.push([name, req.headers[name]])
        delete req.headers[name]
      }
    }
    if (conditional.ifNoneMatch !== undefined) req.headers['if-none-match'] = conditional.ifNoneMatch
    if (conditional.ifModifiedSince !== undefined) req.headers['if-modified-since'] = conditional.ifModifiedSince
    if (method.toUpperCase() === 'HEAD') req.method = 'GET'
    // The handler makes the variant for the reduced Accept-Encoding (accept-encoding.ts),
    // so whatever it picks is acceptable to every client reduced to the same value.
    const acceptEncoding = req.headers['accept-encoding']
    const coding = reducedAcceptEncoding(acceptEncoding)
    if (coding !== undefined) req.headers['accept-encoding'] = coding
    return () => {
      req.method = method
      delete req.headers['if-none-match']
      delete req.headers['if-modified-since']
      for (const [name, value] of hidden) req.headers[name] = value
      if (acceptEncoding === undefined) delete req.headers['accept-encoding']
      else req.headers['accept-encoding'] = acceptEncoding
    }
  }
}

/** The route runs uncached for this request (`X-Cache: BYPASS`, `Cache-Status` with `reason`). */
export function passThrough(res: Response, next: NextFunction, settings: RouteSettings, reason?: string): void {
  if (!res.headersSent) for (const [name, value] of bypassHeaders(settings, reason)) res.setHeader(name, value)
  next()
}

/** A 502 with no headers of the failed response, if the head has not gone out; else the connection is cut. */
function abandon(res: Response): void {
  try {
    if (!res.headersSent) {
      for (const name of res.getHeaderNames()) res.removeHeader(name)
      res.writeHead(502, 'Bad Gateway').end()
      return
    }
  } catch {
    // fall through: cut the connection
  }
  res.destroy()
}

/** Tells `onError`; an observer that throws must not break the request. */
export function reportError(settings: RouteSettings, error: unknown, req: Request): void {
  try {
    settings.onError(error, req)
  } catch {
    // ignored
  }
}
