/** Raw HTTP to a served app: exact bytes, no decompression, the Host every key is made with. */
import http, { type IncomingHttpHeaders } from 'node:http'

export const HOST = 'shop.test'

export interface Reply {
  status: number
  headers: IncomingHttpHeaders
  body: Buffer
  /** False when the connection was cut before the response ended. */
  complete: boolean
}

export interface SendOptions {
  method?: string
  headers?: Record<string, string>
  body?: string
  /** Send the request-target in absolute form, naming this authority (`http://<authority><path>`); Host stays. */
  absoluteFormAuthority?: string
  /** Abort the request (close the connection) once this many ms passed without an answer. */
  abortAfterMs?: number
}

export function send(port: number, path: string, options: SendOptions = {}): Promise<Reply> {
  return new Promise((resolve) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        path: options.absoluteFormAuthority === undefined ? path : `http://${options.absoluteFormAuthority}${path}`,
        method: options.method ?? 'GET',
        headers: { host: HOST, ...options.headers },
        agent: false,
      },
      (res) => {
        const chunks: Buffer[] = []
        res.on('data', (chunk: Buffer) => chunks.push(chunk))
        const done = (complete: boolean) =>
          resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks), complete })
        res.on('end', () => done(res.complete))
        res.on('error', () => done(false))
        res.on('aborted', () => done(false))
      },
    )
    // A connection cut before any answer: status 0 (a case asserting a status then fails, with it in view).
    req.on('error', () => resolve(aborted))
    if (options.abortAfterMs !== undefined) setTimeout(() => req.destroy(), options.abortAfterMs)
    if (options.body !== undefined) req.end(options.body)
    else req.end()
  })
}

const aborted: Reply = { status: 0, headers: {}, body: Buffer.alloc(0), complete: false }
