import { StreamableFile } from '@nestjs/common'
import { ServerResponse } from 'node:http'
import { headerOf, withoutFields } from '../http/headers.js'
import type { HttpAnswer } from '../http/origin-exchange.js'
import type { HttpHeaders } from '../http/request.js'
import type { NestResponseLike } from './shapes.js'
import { webResponseOf } from './web-response.js'

/** What the interceptor knows of the request and the route when it hands Nest an answer. */
export interface AnswerContext {
  head: boolean
  /** The status Nest sends a returned value with (`@HttpCode()`, else its default for the method). */
  routeStatus: number
  /** The client's request fields. */
  headers: HttpHeaders
}

/**
 * What the interceptor hands Nest to send `answer` on either platform, the fields it
 * removes and sets first. Nest sends a web Response through its streaming path, about
 * 2.5x slower than its plain reply (docs/load-testing.md), so an answer of bytes with the
 * route's own status (Nest sets that status whatever is returned) goes out as bytes: on
 * Fastify the fields on the reply and the Buffer; on Express, written by the interceptor
 * itself when Nest's reply cannot change it (see expressAnswer), else as text or a
 * StreamableFile. Anything else (HEAD, whose empty body Fastify would count as its
 * Content-Length; a 304; another status) is a web Response.
 */
export function answerFor(answer: HttpAnswer, res: NestResponseLike, context: AnswerContext): unknown {
  for (const name of answer.remove) res.removeHeader(name)
  const { body } = answer
  if (Buffer.isBuffer(body) && !context.head && answer.status === context.routeStatus) {
    if (res.raw) {
      const reply = res as NestResponseLike & { header(name: string, value: string | string[]): unknown }
      for (const [name, value] of answer.headers) reply.header(name, value)
      return body
    }
    return expressAnswer(answer, body, res as NestResponseLike & ServerResponse, context)
  }
  let headers = answer.headers
  const type = headerOf(headers, 'content-type')
  if (!res.raw && type !== undefined) {
    // Nest's Express platform sets a Response's fields with res.set() (a charset added, as above).
    ServerResponse.prototype.setHeader.call(res, 'Content-Type', type)
    headers = withoutFields(headers, ['content-type'])
  }
  return webResponseOf(answer.status, headers, body)
}

/** Statuses for which Express's `res.send()` rewrites the response (strips fields, empties the body). */
const SEND_REWRITES = new Set([204, 205, 304])

/**
 * An answer of bytes with the route's status, on Nest's Express platform.
 *
 * Nest's reply of a value (a string: Express's `res.send()`) costs a hit more than the
 * route's own handler: a charset parse, a Buffer from the string, an ETag hash. So the
 * interceptor writes the response itself and hands Nest `undefined`, which Nest's reply
 * turns into `res.send()` with no body: on an ended response that sets nothing and ends
 * nothing (Node ignores an `end()` without data once finished), unless Express finds the
 * request fresh, turns the status to 304 and removes fields, which Node refuses once sent.
 * Fresh needs a validator in the request, so a request with `If-None-Match` or
 * `If-Modified-Since`, and a route status Express rewrites anyway, keep Nest's reply.
 *
 * Written here, a response carries what `res.send()` would have added: the ETag of the
 * app's `etag fn` when the answer has none (computed once per stored body), and no charset
 * added to its type (which Express's `res.set()` would). What interceptors outside this
 * one see is `undefined`, not the body.
 */
function expressAnswer(
  answer: HttpAnswer,
  body: Buffer,
  res: NestResponseLike & ServerResponse,
  context: AnswerContext,
): unknown {
  const conditional =
    context.headers['if-none-match'] !== undefined || context.headers['if-modified-since'] !== undefined
  if (!conditional && !SEND_REWRITES.has(answer.status) && !res.headersSent) {
    for (const [name, value] of answer.headers) res.setHeader(name, value)
    const etag = body.length > 0 && !res.hasHeader('etag') ? expressEtagOf(res, body) : undefined
    if (etag !== undefined) res.setHeader('ETag', etag)
    res.statusCode = answer.status
    if (answer.statusMessage !== undefined) res.statusMessage = answer.statusMessage
    res.end(body)
    return undefined
  }
  // Express's res.set() would add a charset to a text Content-Type: Node's setHeader sends it as stored.
  for (const [name, value] of answer.headers) ServerResponse.prototype.setHeader.call(res, name, value)
  // Nest's Express platform sends a string with res.send(), its fast path, which keeps the fields
  // set here and adds only a charset: so a UTF-8 body whose type names that charset goes as text.
  const text = utf8TextOf(body, headerOf(answer.headers, 'content-type'))
  return text ?? new StreamableFile(body)
}

/** Express's ETag function, as `res.send()` calls it: the app's `etag fn` setting (none when ETags are off). */
type EtagFn = (body: Buffer, encoding?: string) => string | undefined

/** The ETag per stored body and ETag function: a hit hands over the same Buffer each time. */
const etags = new WeakMap<Buffer, { fn: EtagFn; etag: string | undefined }>()

function expressEtagOf(res: ServerResponse, body: Buffer): string | undefined {
  const app = (res as ServerResponse & { app?: { get(setting: string): unknown } }).app
  const fn = app?.get('etag fn')
  if (typeof fn !== 'function') return undefined
  const known = etags.get(body)
  if (known?.fn === fn) return known.etag
  const etag = (fn as EtagFn)(body)
  etags.set(body, { fn: fn as EtagFn, etag })
  return etag
}

/** `body` as a string when sending it as one changes no byte and no field (UTF-8, and its type says so). */
function utf8TextOf(body: Buffer, type: string | undefined): string | undefined {
  if (type === undefined || !/;\s*charset=utf-8\s*$/i.test(type)) return undefined
  const text = body.toString('utf8')
  return Buffer.byteLength(text) === body.length && !text.includes('\uFFFD') ? text : undefined
}
