import { Readable } from 'node:stream'
import type { BodySource } from '../http/body-capture.js'
import type { HeaderList } from '../http/headers.js'
import { bodyless } from '../http/replay.js'

/**
 * An answer as the web Response a Nest handler may return: Nest 12 sends it on either
 * platform, its status and fields over those set before. A bodyless status gets no body
 * (the Response constructor refuses one); HEAD keeps the Content-Length given.
 */
export function webResponseOf(status: number, headers: HeaderList, body: BodySource): Response {
  const fields = new Headers()
  for (const [name, value] of headers)
    for (const one of Array.isArray(value) ? value : [value]) fields.append(name, String(one))
  return new Response(bodyless(status) ? null : (contentOf(body) as BodyInit | null), { status, headers: fields })
}

function contentOf(body: BodySource): Uint8Array | string | ReadableStream<Uint8Array> | null {
  if (body === undefined || body === null) return null
  // A string body would get a default Content-Type from the Response: bytes get none.
  if (typeof body === 'string') return Buffer.from(body)
  if (body instanceof Uint8Array) return body
  return Readable.toWeb(Readable.from(body)) as ReadableStream<Uint8Array>
}
