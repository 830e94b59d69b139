import { createRequire } from 'node:module'
import type { BinaryCodec } from './codecs.js'
import { InvalidArgumentError } from './errors.js'

/** The part of the `msgpackr` package this codec uses (its own types stay out of ours). */
export interface MsgpackrLike {
  Packr: new (options: { structuredClone: boolean }) => {
    pack(value: unknown): Uint8Array
    unpack(bytes: Uint8Array): unknown
  }
}

/**
 * A codec of MessagePack bytes on msgpackr (an optional peer dependency: `npm install
 * msgpackr`), loaded when this is called. Stored as bytes, never through UTF-8 or base64:
 * smaller than JSON for numbers and repeated object shapes, and a `Buffer` or typed array
 * is stored as its bytes.
 *
 * Round-trips what JSON changes: `Date`, `Map` (any keys), `Set`, `BigInt`, `RegExp`,
 * `Error`, `Buffer` and typed arrays, `NaN`, `±Infinity`, `undefined` (in objects and
 * arrays), and repeated or circular references (msgpackr's `structuredClone`). Like
 * superjson, class instances come back as plain objects and functions vanish; `-0` comes
 * back `0`. Each value carries its own record definitions, so any process can read any value.
 *
 * Pass the module in where `require` cannot reach it (a bundle): `msgpackCodec(msgpackr)`.
 * Every process sharing a namespace must use it (values are marked `msgpack`).
 */
export function msgpackCodec(msgpackr?: MsgpackrLike): BinaryCodec {
  const module = msgpackr ?? loadMsgpackr()
  if (typeof module?.Packr !== 'function')
    throw new InvalidArgumentError('codec', 'msgpackCodec needs the msgpackr module (with its Packr class)')
  const packr = new module.Packr({ structuredClone: true })
  return {
    binary: true,
    name: 'msgpack',
    encode: (value) => packr.pack(value),
    decode: (bytes) => packr.unpack(bytes),
  }
}

function loadMsgpackr(): MsgpackrLike {
  try {
    return createRequire(import.meta.url)('msgpackr') as MsgpackrLike
  } catch (error) {
    if ((error as { code?: string }).code !== 'MODULE_NOT_FOUND') throw error
    throw new InvalidArgumentError('codec', 'msgpackCodec needs the msgpackr package (npm install msgpackr)')
  }
}
