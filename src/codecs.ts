/**
 * The codecs that come with stampede-guard.
 *
 * JSON changes some values silently: `NaN` and `±Infinity` become `null`, a `Date` a
 * string, a `Map` or `Set` `{}`, a typed array an object of indices, a function or
 * `undefined` inside an array `null`, a class instance a plain object. The leader's
 * callers would get the original and every other caller the changed copy. So the default
 * {@link jsonCodec} refuses such values: it throws while encoding, and the cache reports
 * the value as `uncacheable` (with the reason and where it is) and returns it to its own
 * callers without storing it. {@link superjsonCodec} stores most of them faithfully.
 */

/** Turns values into strings for Redis and back. Must throw on what it cannot encode. */
export interface Codec {
  encode(value: unknown): string
  decode(text: string): unknown
}

/** Why JSON would not give `raw` back, or undefined when it would. `inArray`: `raw` is an array element. */
function lossOf(raw: unknown, inArray: boolean): string | undefined {
  switch (typeof raw) {
    case 'number':
      return Number.isFinite(raw) ? undefined : `${raw} would become null`
    case 'function':
    case 'symbol':
      return `a ${typeof raw} would ${inArray ? 'become null' : 'vanish'}`
    case 'undefined':
      // A missing property reads back as undefined too; an array slot would read null.
      return inArray ? 'undefined (or a hole) in an array would become null' : undefined
    case 'object': {
      if (raw === null) return undefined
      if (Array.isArray(raw)) return undefined
      const prototype = Object.getPrototypeOf(raw) as object | null
      if (prototype !== Object.prototype && prototype !== null) {
        const name = (prototype.constructor as { name?: string } | undefined)?.name || 'object'
        return `a ${name} would become ${typeof (raw as { toJSON?: unknown }).toJSON === 'function' ? 'what its toJSON() returns' : 'a plain object'}`
      }
      if (typeof (raw as { toJSON?: unknown }).toJSON === 'function')
        return 'an object with toJSON() would become what it returns'
      return undefined
    }
    default:
      return undefined // string, boolean; bigint makes JSON.stringify throw by itself
  }
}

/**
 * JSON that refuses what it cannot give back unchanged (see above). Accepted as they are:
 * plain objects, arrays, strings, finite numbers, booleans, `null`; a property whose value
 * is `undefined` (dropped, and it reads back as `undefined`); `-0` (stored as `0`, which is
 * `=== -0`). Symbol-keyed properties are not stored. Decoding is plain `JSON.parse`.
 */
export const jsonCodec: Codec = {
  encode(value) {
    const text = JSON.stringify(value, function (this: Record<string, unknown>, key, converted: unknown) {
      // `this[key]` is the value before toJSON(); `converted` is what JSON will write.
      const loss = lossOf(this[key], Array.isArray(this))
      if (loss !== undefined)
        throw new TypeError(
          `JSON would change this value: ${loss}${key === '' ? '' : ` (at ${JSON.stringify(key)})`}; use superjsonCodec or your own codec to store it`,
        )
      return converted
    })
    if (text === undefined) throw new TypeError(`cannot encode ${typeof value} as JSON`)
    return text
  },
  decode(text) {
    return JSON.parse(text)
  },
}

/** The part of the `superjson` package this codec uses. */
export interface SuperJsonLike {
  stringify(value: unknown): string
  parse(text: string): unknown
}

/**
 * A codec on superjson, which round-trips what JSON changes: `NaN`, `±Infinity`, `-0`,
 * `Date`, `Map`, `Set`, `RegExp`, `BigInt`, typed arrays, `undefined` (in arrays too), `URL`,
 * `Error`, and repeated references. Functions still vanish, and class instances come back
 * as plain objects unless registered with `superjson.registerClass`. Pass the module in, so
 * stampede-guard needs no dependency on it:
 *
 * ```ts
 * import superjson from 'superjson'
 * createCache({ redis, ttl: '5m', codec: superjsonCodec(superjson) })
 * ```
 */
export function superjsonCodec(superjson: SuperJsonLike): Codec {
  if (typeof superjson?.stringify !== 'function' || typeof superjson?.parse !== 'function') {
    throw new TypeError('superjsonCodec needs the superjson module (with stringify and parse)')
  }
  return {
    encode: (value) => superjson.stringify(value),
    decode: (text) => superjson.parse(text),
  }
}
