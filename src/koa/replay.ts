import { Readable } from 'node:stream'
import type { HttpAnswer } from '../http/origin-exchange.js'
import type { KoaContextLike } from './context.js'

/**
 * Puts the engine's answer on `ctx`, as the downstream would have: middleware above the
 * cache sees (and may change) `ctx.status`, the fields and `ctx.body`, and Koa sends it.
 * The order matters to Koa's setters: the body first (it would otherwise pick a
 * Content-Type and make the status 200), then the fields (the answer's Content-Type and
 * Content-Length win), then the status (which drops the body of a 204/304). HEAD gets
 * the fields with the GET's Content-Length and no body (Koa sends none for HEAD).
 */
export function answerOnContext(ctx: KoaContextLike, answer: HttpAnswer, head: boolean): void {
  const body = koaBody(answer.body)
  if (body !== undefined && !head && ctx.body !== body) ctx.body = body
  for (const name of answer.remove) ctx.remove(name)
  // Koa types a Buffer body application/octet-stream; an answer without a type has none.
  if (body !== undefined && !answer.headers.some(([name]) => name.toLowerCase() === 'content-type'))
    ctx.remove('Content-Type')
  for (const [name, value] of answer.headers) ctx.set(name, value)
  ctx.status = answer.status
  if (answer.statusMessage !== undefined) ctx.message = answer.statusMessage
}

function koaBody(body: HttpAnswer['body']): Buffer | string | Readable | undefined {
  if (body === undefined || body === null) return undefined
  if (typeof body === 'string' || Buffer.isBuffer(body)) return body
  if (body instanceof Uint8Array) return Buffer.from(body.buffer, body.byteOffset, body.byteLength)
  return body instanceof Readable ? body : Readable.from(body)
}
