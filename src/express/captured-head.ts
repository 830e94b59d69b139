import type { OutgoingHttpHeaders } from 'node:http'
import { HeaderMap, INVALID_REASON, type HeaderList, type HeaderValue } from '../http/headers.js'

/**
 * The response head a handler has written into a capture: status, reason phrase, header
 * fields, and whether it was committed (`writeHead`, or the implicit head of the first
 * write). Its methods follow Node's `ServerResponse` in what they accept, what they refuse
 * (with Node's error codes) and in what order they check, so a handler behaves the same
 * whether it writes to the live response or into a capture.
 */
export class CapturedHead {
  status = 200
  statusMessage: string | undefined
  readonly headers: HeaderMap
  committed = false

  /** `initialHeaders`: set by middleware before the capture; the handler sees them, as it would. */
  constructor(initialHeaders: HeaderList) {
    this.headers = HeaderMap.from(initialHeaders)
  }

  /** Node throws ERR_HTTP_HEADERS_SENT for header changes after the head; so do we. */
  assertUnsent(action: string): void {
    if (this.committed)
      throw Object.assign(new Error(`Cannot ${action} headers after they are sent to the client`), {
        code: 'ERR_HTTP_HEADERS_SENT',
      })
  }

  /** `res.setHeaders(headers)`: a `Headers` object's `Set-Cookie` fields stay separate, as Node keeps them. */
  setHeaders(headers: Headers | Map<string, HeaderValue>): void {
    this.assertUnsent('set')
    const cookies = headers instanceof Headers ? headers.getSetCookie() : []
    for (const [name, value] of headers) {
      if (headers instanceof Headers && name.toLowerCase() === 'set-cookie') continue
      this.headers.set(name, value)
    }
    if (cookies.length) this.headers.set('set-cookie', cookies)
  }

  /** `res.writeHead(...args)`, committing the head. */
  writeHead(args: unknown[]): void {
    if (this.committed)
      throw Object.assign(new Error('Cannot write headers after they are sent to the client'), {
        code: 'ERR_HTTP_HEADERS_SENT',
      })
    const status = args[0] as number
    let [, reason, fields] = args as [number, unknown, unknown]
    // As Node: writeHead(status, headers), and writeHead(status, undefined, headers) too.
    if (typeof reason !== 'string') {
      fields ??= reason
      reason = undefined
    }
    const code = Number(status) | 0
    if (code < 100 || code > 999)
      throw Object.assign(new RangeError(`Invalid status code: ${String(status)}`), {
        code: 'ERR_HTTP_INVALID_STATUS_CODE',
      })
    this.status = code
    if (reason !== undefined) this.statusMessage = reason as string
    // Node refuses a reason phrase that would split the status line, at this point too:
    // the handler's own error path runs, and such a phrase is never stored.
    if (this.statusMessage !== undefined && INVALID_REASON.test(this.statusMessage)) {
      throw Object.assign(new TypeError('Invalid character in statusMessage'), { code: 'ERR_INVALID_CHAR' })
    }
    if (Array.isArray(fields)) this.replaceFields(fields)
    else if (fields && typeof fields === 'object') {
      for (const [name, value] of Object.entries(fields as OutgoingHttpHeaders))
        if (value !== undefined) this.headers.set(name, value)
    }
    this.committed = true
  }

  /** As Node: a flat [name, value, ...] list replaces what was set before, keeping its own duplicates. */
  private replaceFields(fields: unknown[]): void {
    if (fields.length % 2 !== 0)
      throw Object.assign(new TypeError("The argument 'headers' is invalid: an odd number of entries"), {
        code: 'ERR_INVALID_ARG_VALUE',
      })
    for (let i = 0; i < fields.length; i += 2) this.headers.delete(String(fields[i]))
    for (let i = 0; i < fields.length; i += 2)
      if (fields[i]) this.headers.append(String(fields[i]), fields[i + 1] as HeaderValue)
  }

  /** Server-sent events never end: not a response to buffer. */
  get isEventStream(): boolean {
    return String(this.headers.get('content-type') ?? '')
      .toLowerCase()
      .startsWith('text/event-stream')
  }

  /** Is a body of `bodyLength` bytes as long as `Content-Length` says (when it says, and the status has a body)? */
  framesBody(bodyLength: number): boolean {
    const declared = this.headers.get('content-length')
    if (declared === undefined || this.status < 200 || this.status === 204 || this.status === 304) return true
    return /^\d+$/.test(String(declared).trim()) && Number(String(declared).trim()) === bodyLength
  }
}
