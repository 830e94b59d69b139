/**
 * The default codec's format: JSON, plus a few tags for what JSON would change.
 *
 * - A value JSON gives back unchanged is stored as `JSON.stringify` writes it, byte for byte,
 *   and read with a bare `JSON.parse`: the hit path of plain data costs what it did.
 * - A value holding a `Date`, `BigInt`, `Map`, `Set`, `NaN`/`±Infinity`, or `undefined` in an
 *   array (a hole too) is stored as `~` and then JSON in which each such value is an object
 *   with one key, its tag: `{"~d":1767323045678}` (a Date's time in ms; `null`: Invalid Date),
 *   `{"~b":"123"}`, `{"~m":[[key,value],…]}`, `{"~s":[…]}`, `{"~n":"NaN"}`, `{"~u":0}`. In such
 *   a document a key of your own that starts with `~` is written with one more `~` in front.
 *   No JSON text starts with `~`, so the two forms cannot be confused.
 * - Anything else JSON would change is refused (see `lossOf`), with the reason and the key
 *   where it is: a class instance, a typed array, a RegExp, an object with `toJSON`, a
 *   function or symbol, a cycle.
 *
 * `-0` is stored as `0` (which `=== -0`), and a property whose value is `undefined` is left
 * out (it reads back as `undefined`), as JSON does.
 */

/** A value the format cannot store unchanged; `reason` names the kind (no key, no value). */
export class UnencodableValueError extends TypeError {
  constructor(
    readonly reason: string,
    where: string,
  ) {
    super(`${reason}${where}; use superjsonCodec or a codec of your own to store it`)
    this.name = 'UnencodableValueError'
  }
}

/** Stored data that is not in this format (or names an unknown tag). */
export class MalformedTaggedJsonError extends SyntaxError {
  constructor(message: string) {
    super(`not the default codec's tagged JSON: ${message}`)
    this.name = 'MalformedTaggedJsonError'
  }
}

const TAGGED = '~'
const TAGGED_CODE = 0x7e
/** Thrown by the plain pass at the first value that needs a tag: the tagged pass starts over. */
const NEEDS_TAGS: unique symbol = Symbol('needs tags')

/** Why the format cannot give `raw` back at all, or undefined when it can (plainly or tagged). */
function lossOf(raw: unknown): string | undefined {
  switch (typeof raw) {
    case 'function':
    case 'symbol':
      return `a ${typeof raw} cannot be stored`
    case 'object': {
      if (raw === null || Array.isArray(raw) || isTaggedClass(raw)) return undefined
      const prototype = Object.getPrototypeOf(raw) as object | null
      if (prototype !== Object.prototype && prototype !== null) {
        const name = (prototype.constructor as { name?: string } | undefined)?.name || 'object'
        const toJSON = typeof (raw as { toJSON?: unknown }).toJSON === 'function'
        return `a ${name} would become ${toJSON ? 'what its toJSON() returns' : 'a plain object'}`
      }
      if (typeof (raw as { toJSON?: unknown }).toJSON === 'function')
        return 'an object with toJSON() would become what it returns'
      return undefined
    }
    default:
      return undefined
  }
}

/** A Date, Map or Set itself (not a subclass, whose own behaviour a plain copy would lose). */
function isTaggedClass(raw: object): boolean {
  const prototype = Object.getPrototypeOf(raw) as object | null
  return prototype === Date.prototype || prototype === Map.prototype || prototype === Set.prototype
}

/** Does `raw`, held by `holder`, need a tag? */
function needsTag(raw: unknown, holder: unknown): boolean {
  switch (typeof raw) {
    case 'number':
      return !Number.isFinite(raw)
    case 'bigint':
      return true
    case 'undefined':
      return Array.isArray(holder)
    case 'object':
      return raw !== null && isTaggedClass(raw)
    default:
      return false
  }
}

function where(key: string): string {
  return key === '' ? '' : ` (at ${JSON.stringify(key)})`
}

/** The tagged stand-in for `raw`, or `raw` itself (with its `~` keys escaped) when it needs none. */
function tagged(raw: unknown, holder: unknown): unknown {
  if (needsTag(raw, holder)) {
    if (raw instanceof Date) {
      const time = raw.getTime()
      return { '~d': Number.isNaN(time) ? null : time }
    }
    if (raw instanceof Map) return { '~m': Array.from(raw) }
    if (raw instanceof Set) return { '~s': Array.from(raw) }
    if (typeof raw === 'bigint') return { '~b': raw.toString() }
    if (raw === undefined) return { '~u': 0 }
    return { '~n': String(raw) }
  }
  if (typeof raw === 'object' && raw !== null && !Array.isArray(raw)) {
    if (Object.keys(raw).some((name) => name.charCodeAt(0) === TAGGED_CODE)) {
      // A null-prototype copy: a "__proto__" key stays a key.
      const escaped = Object.create(null) as Record<string, unknown>
      for (const [name, value] of Object.entries(raw))
        escaped[name.charCodeAt(0) === TAGGED_CODE ? TAGGED + name : name] = value
      return escaped
    }
  }
  return raw
}

function encodeWith(value: unknown, tagging: boolean): string | undefined {
  return JSON.stringify(value, function (this: unknown, key, converted: unknown) {
    // `this[key]` is the value before toJSON(); `converted` is what JSON would write.
    const raw = (this as Record<string, unknown>)[key]
    const loss = lossOf(raw)
    if (loss !== undefined) throw new UnencodableValueError(loss, where(key))
    if (!tagging) {
      if (needsTag(raw, this)) throw NEEDS_TAGS
      return converted
    }
    return tagged(raw, this)
  })
}

/** `value` in the format; throws `UnencodableValueError` on what it cannot store unchanged. */
export function encodeTaggedJson(value: unknown): string {
  let text: string | undefined
  try {
    text = encodeWith(value, false)
  } catch (error) {
    if (error !== NEEDS_TAGS) throw refusal(error)
    try {
      text = TAGGED + encodeWith(value, true)
    } catch (tagError) {
      throw refusal(tagError)
    }
  }
  if (text === undefined) throw new UnencodableValueError(`${typeof value} cannot be stored`, '')
  return text
}

function refusal(error: unknown): unknown {
  if (error instanceof UnencodableValueError) return error
  // JSON.stringify's own: a cycle (TypeError), or a Map or Set that contains itself (the stack ran out).
  if (error instanceof TypeError && /circular/i.test(error.message))
    return new UnencodableValueError('a circular reference cannot be stored', '')
  if (error instanceof RangeError) return new UnencodableValueError('a Map or Set nested too deeply (or in itself)', '')
  return error
}

/** The inverse of encodeTaggedJson. Throws on malformed data. */
export function decodeTaggedJson(text: string): unknown {
  if (text.charCodeAt(0) !== TAGGED_CODE) return JSON.parse(text)
  return restore(JSON.parse(text.slice(1)))
}

/** Replaces tags by their values, inner ones first (a walk: faster than a JSON.parse reviver). */
function restore(value: unknown): unknown {
  if (typeof value !== 'object' || value === null) return value
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const item: unknown = value[i]
      if (typeof item === 'object' && item !== null) value[i] = restore(item)
    }
    return value
  }
  const record = value as Record<string, unknown>
  const names = Object.keys(record)
  let escaped = false
  for (const name of names) {
    if (name.charCodeAt(0) === TAGGED_CODE) escaped = true
    const item = record[name]
    // An own "__proto__" from JSON.parse is a data property: assigning it sets that, not the prototype.
    if (typeof item === 'object' && item !== null) record[name] = restore(item)
  }
  if (!escaped) return record
  const first = names[0]!
  if (names.length === 1 && first.charCodeAt(1) !== TAGGED_CODE) return untag(first, record[first])
  const unescaped: Record<string, unknown> = {}
  for (const name of names) {
    const isEscaped = name.charCodeAt(0) === TAGGED_CODE
    if (isEscaped && name.charCodeAt(1) !== TAGGED_CODE)
      throw new MalformedTaggedJsonError(`tag ${JSON.stringify(name)} beside other keys`)
    // defineProperty: a "__proto__" key stays a key, as JSON.parse leaves it.
    Object.defineProperty(unescaped, isEscaped ? name.slice(1) : name, {
      value: record[name],
      enumerable: true,
      writable: true,
      configurable: true,
    })
  }
  return unescaped
}

function untag(tag: string, body: unknown): unknown {
  switch (tag) {
    case '~d':
      if (body === null) return new Date(NaN)
      if (typeof body === 'number') return new Date(body)
      break
    case '~b':
      if (typeof body === 'string' && /^-?\d+$/.test(body)) return BigInt(body)
      break
    case '~m':
      if (Array.isArray(body) && body.every((entry) => Array.isArray(entry) && entry.length === 2))
        return new Map(body as [unknown, unknown][])
      break
    case '~s':
      if (Array.isArray(body)) return new Set(body)
      break
    case '~n':
      if (body === 'NaN' || body === 'Infinity' || body === '-Infinity') return Number(body)
      break
    case '~u':
      if (body === 0) return undefined
      break
  }
  throw new MalformedTaggedJsonError(`${JSON.stringify(tag)} with ${JSON.stringify(body) ?? typeof body}`)
}
