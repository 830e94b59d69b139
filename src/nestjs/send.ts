import { StreamableFile } from '@nestjs/common'
import { ServerResponse } from 'node:http'
import { headerOf, withoutFields } from '../http/headers.js'
import type { HttpAnswer } from '../http/origin-exchange.js'
import type { NestResponseLike } from './shapes.js'
import { webResponseOf } from './web-response.js'

/**
 * What the interceptor hands Nest to send `answer` on either platform, the fields it
 * removes and sets first. Nest sends a web Response through its streaming path, about
 * 2.5x slower than its plain reply (docs/load-testing.md), so an answer of bytes with the
 * route's own status (Nest sets that status whatever is returned) goes out as bytes: on
 * Fastify the fields on the reply and the Buffer, on Express the fields with Node's
 * setHeader and a StreamableFile. Anything else (HEAD, whose empty body Fastify would
 * count as its Content-Length; a 304; another status) is a web Response.
 */
export function answerFor(answer: HttpAnswer, res: NestResponseLike, head: boolean, routeStatus: number): unknown {
  for (const name of answer.remove) res.removeHeader(name)
  const { body } = answer
  if (Buffer.isBuffer(body) && !head && answer.status === routeStatus) {
    if (res.raw) {
      const reply = res as NestResponseLike & { header(name: string, value: string | string[]): unknown }
      for (const [name, value] of answer.headers) reply.header(name, value)
      return body
    }
    // Express's res.set() would add a charset to a text Content-Type: Node's setHeader sends it as stored.
    for (const [name, value] of answer.headers) ServerResponse.prototype.setHeader.call(res, name, value)
    // Nest's Express platform sends a string with res.send(), its fast path, which keeps the fields
    // set here and adds only a charset: so a UTF-8 body whose type names that charset goes as text.
    const text = utf8TextOf(body, headerOf(answer.headers, 'content-type'))
    return text ?? new StreamableFile(body)
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

/** `body` as a string when sending it as one changes no byte and no field (UTF-8, and its type says so). */
function utf8TextOf(body: Buffer, type: string | undefined): string | undefined {
  if (type === undefined || !/;\s*charset=utf-8\s*$/i.test(type)) return undefined
  const text = body.toString('utf8')
  return Buffer.byteLength(text) === body.length && !text.includes('\uFFFD') ? text : undefined
}
