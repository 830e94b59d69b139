import { StreamableFile } from '@nestjs/common'
import { Readable } from 'node:stream'
import type { HeaderList } from '../http/headers.js'

/** What a handler's return value is sent as: its status, the fields it adds, its body (bytes, or a stream to read). */
export interface NestOrigin {
  status: number
  /** Fields the value brings (a Response's, a StreamableFile's type), over those on the platform response. */
  headers: HeaderList
  /** Content-Type for the body when the platform response has none. */
  defaultType?: string
  body: Buffer | AsyncIterable<Uint8Array>
}

/**
 * A route handler's return value, serialized as Nest's platforms send it: an object or
 * array as JSON; a string as text (Express sends `text/html`, Fastify `text/plain`); a
 * Buffer or Uint8Array as bytes; a web Response with its own status and fields; a
 * StreamableFile, a ReadableStream or a Node stream to be read. `status` is the route's
 * (`@HttpCode()`, or Nest's default for the method).
 */
export function nestOriginOf(value: unknown, status: number, platform: 'express' | 'fastify'): NestOrigin {
  if (value instanceof Response) {
    const headers: HeaderList = [...value.headers].filter(([name]) => name !== 'set-cookie')
    const cookies = value.headers.getSetCookie()
    if (cookies.length > 0) headers.push(['set-cookie', cookies])
    return { status: value.status, headers, body: value.body ? Readable.from(value.body) : Buffer.alloc(0) }
  }
  if (value instanceof StreamableFile) {
    const { type, disposition, length } = value.getHeaders()
    const headers: HeaderList = []
    if (disposition !== undefined) headers.push(['Content-Disposition', disposition])
    if (length !== undefined) headers.push(['Content-Length', String(length)])
    return { status, headers, defaultType: type, body: value.getStream() }
  }
  if (value === undefined || value === null) return { status, headers: [], body: Buffer.alloc(0) }
  if (typeof value === 'string')
    return {
      status,
      headers: [],
      defaultType: platform === 'express' ? 'text/html; charset=utf-8' : 'text/plain; charset=utf-8',
      body: Buffer.from(value),
    }
  if (value instanceof Uint8Array)
    return { status, headers: [], defaultType: 'application/octet-stream', body: Buffer.from(value) }
  if (value instanceof ReadableStream)
    return { status, headers: [], defaultType: 'application/octet-stream', body: Readable.from(value) }
  if (value instanceof Readable) return { status, headers: [], defaultType: 'application/octet-stream', body: value }
  if (typeof value !== 'object')
    return { status, headers: [], defaultType: 'text/plain; charset=utf-8', body: Buffer.from(String(value)) }
  return {
    status,
    headers: [],
    defaultType: 'application/json; charset=utf-8',
    body: Buffer.from(JSON.stringify(value)),
  }
}
