import { Readable } from 'node:stream'
import { bodyless } from '../http/replay.js'
import type { HeaderList } from '../http/headers.js'

/**
 * An answer as the web Response a Nest handler may return: Nest 12 sends it on either
 * platform, its status and fields over those set before. A bodyless status gets no body
 * (the Response constructor refuses one); HEAD keeps the Content-Length given.
 */
export function webResponseOf(
  status: number,
  headers: HeaderList,
  body: Buffer | AsyncIterable<Uint8Array> | undefined,
): Response {
  const fields = new Headers()
  for (const [name, value] of headers)
    for (const one of Array.isArray(value) ? value : [value]) fields.append(name, String(one))
  const content =
    bodyless(status) || body === undefined
      ? null
      : Buffer.isBuffer(body)
        ? body
        : (Readable.toWeb(Readable.from(body)) as ReadableStream<Uint8Array>)
  return new Response(content as BodyInit | null, { status, headers: fields })
}
