import type { Directives } from './cache-control.js'
import { headerOf, type HeaderList } from './headers.js'

/**
 * Targeted cache-control fields (RFC 9213), framework-free. A cache that knows a field
 * aimed at it (`CDN-Cache-Control`, or a name of its own such as `Surrogate-Control`)
 * uses the first of them, in its order of precedence, that the response carries and that
 * parses, instead of `Cache-Control` and `Expires`. The field is a Structured Field
 * Dictionary (RFC 8941): one that fails to parse is ignored, as if absent.
 */

/** The directives of the first targeted field in `fields` (lower case) that is present and valid. */
export function targetedDirectives(headers: HeaderList, fields: readonly string[]): Directives | undefined {
  for (const field of fields) {
    const value = headerOf(headers, field)
    if (value === undefined) continue
    const directives = parseDictionary(value)
    if (directives) return directives
  }
  return undefined
}

const KEY = /^[a-z*][a-z0-9_\-.*]*/
const BARE_ITEM = /^(?:-?\d{1,15}(?:\.\d{1,3})?|\?[01]|[A-Za-z*][A-Za-z0-9:/!#$%&'*+\-.^_`|~]*|:[A-Za-z0-9+/=]*:)/

/**
 * An sf-dictionary as directives: a member without a value, or `?1`, is `true`; `?0` is
 * left out; integers, tokens and strings are their text (so `max-age=-1` stays invalid
 * freshness, stale). Parameters are read and ignored. Undefined when the text is not a
 * dictionary.
 */
export function parseDictionary(text: string): Directives | undefined {
  const directives: Directives = new Map()
  let rest = text.trim()
  if (rest === '') return undefined
  while (rest !== '') {
    const key = KEY.exec(rest)?.[0]
    if (!key) return undefined
    rest = rest.slice(key.length)
    let value: string | boolean = true
    if (rest.startsWith('=')) {
      const item = readItem(rest.slice(1))
      if (!item) return undefined
      ;[value, rest] = item
    }
    const afterParameters = skipParameters(rest)
    if (afterParameters === undefined) return undefined
    rest = afterParameters
    // Later members win in a dictionary (RFC 8941 §4.2.2).
    if (value === false) directives.delete(key)
    else directives.set(key, value === true ? true : value)
    rest = rest.replace(/^[ \t]*/, '')
    if (rest === '') break
    if (!rest.startsWith(',')) return undefined
    rest = rest.slice(1).replace(/^[ \t]*/, '')
    if (rest === '') return undefined // a trailing comma
  }
  return directives
}

/** One bare item: [its value, the rest]; `?1` → true, `?0` → false, a string unescaped. */
function readItem(text: string): [string | boolean, string] | undefined {
  if (text.startsWith('"')) {
    let value = ''
    for (let at = 1; at < text.length; at++) {
      const char = text[at]!
      if (char === '"') return [value, text.slice(at + 1)]
      if (char === '\\') {
        const next = text[++at]
        if (next !== '"' && next !== '\\') return undefined
        value += next
      } else if (char < ' ' || char > '~') return undefined
      else value += char
    }
    return undefined
  }
  const item = BARE_ITEM.exec(text)?.[0]
  if (!item) return undefined
  const rest = text.slice(item.length)
  if (item === '?1') return [true, rest]
  if (item === '?0') return [false, rest]
  return [item, rest]
}

/** Skips `;key[=item]` parameters; undefined when malformed. */
function skipParameters(text: string): string | undefined {
  let rest = text
  while (rest.startsWith(';')) {
    rest = rest.slice(1).replace(/^ */, '')
    const key = KEY.exec(rest)?.[0]
    if (!key) return undefined
    rest = rest.slice(key.length)
    if (rest.startsWith('=')) {
      const item = readItem(rest.slice(1))
      if (!item) return undefined
      rest = item[1]
    }
  }
  return rest
}
