import type { BodySource, OriginResponse } from '../http/body-capture.js'
import type { HeaderList } from '../http/headers.js'
import type { HttpAnswer, OriginRequest } from '../http/origin-exchange.js'
import type { HttpHeaders, HttpRequest } from '../http/request.js'

/**
 * Between the Fetch API (`Request`, `Response`, `Headers`) and the engine's request,
 * response and answer. Only globals: it runs wherever fetch does (Node, Bun, Deno, workers).
 */

/** The engine's view of a fetch `Request`. */
export function requestView(request: Request): HttpRequest {
  const url = new URL(request.url)
  const headers = headersRecord(request.headers)
  // A fetch server builds request.url from Host; a Request made by hand may carry none.
  headers.host ??= url.host
  // An absolute-form request-target (`GET http://evil.test/p`, Host: shop.test) becomes
  // request.url as sent, so the handler sees another authority than the Host the key is
  // made of: the engine is handed the absolute URL, which it passes by as such.
  const target = sameAuthority(url, headers.host) ? url.pathname + url.search : url.href
  return { method: request.method, url: target, headers, scheme: url.protocol.slice(0, -1) }
}

/** Does `url` name the authority `host` names (the URL drops a scheme's default port, Host may spell it)? */
function sameAuthority(url: URL, host: string | string[]): boolean {
  if (typeof host !== 'string') return false
  const spelled = host.trim().toLowerCase()
  if (spelled === url.host) return true
  const defaultPort = url.protocol === 'https:' ? ':443' : ':80'
  return url.port === '' && spelled === url.hostname + defaultPort
}

export function headersRecord(headers: Headers): HttpHeaders {
  const record: HttpHeaders = {}
  headers.forEach((value, name) => (record[name] = value))
  return record
}

/** The fields of `headers` as a list, each Set-Cookie its own line. */
export function headerList(headers: Headers): HeaderList {
  const list: HeaderList = []
  headers.forEach((value, name) => {
    if (name !== 'set-cookie') list.push([name, value])
  })
  const cookies = headers.getSetCookie()
  if (cookies.length > 0) list.push(['set-cookie', cookies])
  return list
}

/** The request a handler is run with, as a fetch `Request` on `base`'s URL (its body, for an unsafe method). */
export function originRequestOf(base: Request, request: OriginRequest): Request {
  const headers = new Headers()
  for (const [name, value] of Object.entries(request.headers)) {
    if (value === undefined) continue
    for (const item of Array.isArray(value) ? value : [value]) headers.append(name, item)
  }
  const init: RequestInit & { duplex?: 'half' } = { method: request.method, headers, signal: base.signal }
  if (request.method === base.method && base.body !== null) {
    init.body = base.body
    init.duplex = 'half'
  }
  return new Request(base.url, init)
}

/** A fetch `Response` as the engine's origin response. */
export function originResponseOf(response: Response): OriginResponse {
  return {
    status: response.status,
    headers: headerList(response.headers),
    body: response.body as AsyncIterable<Uint8Array> | null,
  }
}

/** Statuses whose Response may not have a body. */
const NULL_BODY = new Set([101, 103, 204, 205, 304])

/**
 * The engine's answer as a fetch `Response`, after `upstream` (fields set before the cache
 * ran). Its fields go as a plain record when they fit one (no field with several values):
 * @hono/node-server's Response then writes them to the socket as they are, where a
 * `Headers` would be built, validated and read back into a record on every hit.
 */
export function responseOf(answer: HttpAnswer, upstream: HeaderList = []): Response {
  const body = NULL_BODY.has(answer.status) ? null : bodyOf(answer.body)
  return new Response(body, {
    status: answer.status,
    headers: fieldRecordOf(answer, upstream) ?? fieldsOf(answer, upstream),
  })
}

/** The answer's fields as a record of lower-case names, or undefined when one has several values (Set-Cookie). */
function fieldRecordOf(answer: HttpAnswer, upstream: HeaderList): Record<string, string> | undefined {
  const record: Record<string, string> = Object.create(null)
  const removed = answer.remove.length > 0 ? new Set(answer.remove.map((name) => name.toLowerCase())) : undefined
  for (const [name, value] of upstream) {
    const lower = name.toLowerCase()
    if (removed?.has(lower)) continue
    if (typeof value !== 'string' || lower in record) return undefined
    record[lower] = value
  }
  for (const [name, value] of answer.headers) {
    if (typeof value !== 'string') return undefined
    record[name.toLowerCase()] = value // replaces an upstream field or an earlier one, as setField does
  }
  return record
}

function fieldsOf(answer: HttpAnswer, upstream: HeaderList): Headers {
  const headers = new Headers()
  const removed = new Set(answer.remove.map((name) => name.toLowerCase()))
  for (const [name, value] of upstream) if (!removed.has(name.toLowerCase())) setField(headers, name, value, false)
  for (const [name, value] of answer.headers) setField(headers, name, value, true)
  return headers
}

function setField(headers: Headers, name: string, value: string | string[], replace: boolean): void {
  if (replace) headers.delete(name)
  for (const item of Array.isArray(value) ? value : [value]) headers.append(name, item)
}

function bodyOf(source: BodySource): BodyInit | null {
  if (source === null || source === undefined) return null
  if (typeof source === 'string') return source
  if (source instanceof Uint8Array) return source as Uint8Array<ArrayBuffer>
  if (source instanceof ReadableStream) return source
  const iterator = source[Symbol.asyncIterator]()
  const encoder = new TextEncoder()
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const step = await iterator.next()
        if (step.done) controller.close()
        else controller.enqueue(typeof step.value === 'string' ? encoder.encode(step.value) : step.value)
      } catch (error) {
        controller.error(error)
      }
    },
    async cancel() {
      await iterator.return?.()
    },
  })
}
