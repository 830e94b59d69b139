import { STATUS_CODES } from 'node:http'
import { Readable } from 'node:stream'
import type { KoaContextLike } from './context.js'

/**
 * The response the downstream left on `ctx`, as Koa would send it (its `respond()`):
 * the status, the reason phrase when not the standard one, and the body as bytes, or
 * as a stream still to be read (a Node stream, a web ReadableStream, a Blob, a Response).
 */
export interface KoaOrigin {
  status: number
  statusMessage?: string
  body: Buffer | AsyncIterable<Uint8Array>
}

/** Statuses Koa sends without a body (its `statuses.empty`). */
const EMPTY_STATUSES = new Set([204, 205, 304])

export function koaOriginOf(ctx: KoaContextLike): KoaOrigin {
  const status = ctx.status
  const origin: KoaOrigin = { status, body: koaBodyOf(ctx, status) }
  // Koa sets its own table's phrase with every status; only another one is kept.
  const message = ctx.res.statusMessage
  if (message && message !== STATUS_CODES[status]) origin.statusMessage = message
  return origin
}

function koaBodyOf(ctx: KoaContextLike, status: number): KoaOrigin['body'] {
  if (EMPTY_STATUSES.has(status)) return Buffer.alloc(0)
  const body = ctx.body
  if (body === null || body === undefined) return noBody(ctx, status)
  if (Buffer.isBuffer(body)) return body
  if (typeof body === 'string') return Buffer.from(body)
  if (body instanceof Blob) return Readable.from(body.stream())
  if (body instanceof ReadableStream) return Readable.from(body)
  if (body instanceof Response) return Readable.from(body.body ?? [])
  if (isNodeStream(body)) return body
  const json = Buffer.from(JSON.stringify(body))
  ctx.set('Content-Length', String(json.length)) // as Koa's respond() sets it
  return json
}

/** Koa's own body for a response nobody gave one: none after `ctx.body = null`, else the reason phrase as text. */
function noBody(ctx: KoaContextLike, status: number): Buffer {
  const explicitNull = (ctx as { response?: { _explicitNullBody?: boolean } }).response?._explicitNullBody === true
  if (explicitNull) {
    ctx.remove('Content-Type')
    ctx.remove('Transfer-Encoding')
    ctx.set('Content-Length', '0')
    return Buffer.alloc(0)
  }
  const text = ctx.req.httpVersionMajor >= 2 ? String(status) : ctx.message || String(status)
  ctx.set('Content-Type', 'text/plain; charset=utf-8')
  const bytes = Buffer.from(text)
  ctx.set('Content-Length', String(bytes.length))
  return bytes
}

function isNodeStream(value: unknown): value is Readable {
  return typeof value === 'object' && value !== null && typeof (value as Readable).pipe === 'function'
}
