import { createHash } from 'node:crypto'
import { headerOf, parseHttpDate, type HeaderList } from './headers.js'

/**
 * Conditional GET against a stored response (RFC 9110 §13; docs/express.md, rule 13).
 * The handler never sees the client's validators (the capture hides them, so it always
 * produces a full response worth storing); the cache answers them here, for hits and
 * misses alike.
 */

/** The request validators, saved before the capture hides them from the handler. */
export interface Validators {
  ifNoneMatch: string | undefined
  ifModifiedSince: string | undefined
}

interface EntityTag {
  weak: boolean
  opaque: string
}

/** `"x"`, `W/"x"`. Commas may appear inside the quotes, so lists are scanned, not split. */
const ENTITY_TAG = /\s*(W\/)?"([^"]*)"\s*(?:,|$)/y

/** Parses an `If-None-Match` list; `'*'`, or undefined when malformed (then it matches nothing). */
export function parseEntityTags(value: string): '*' | EntityTag[] | undefined {
  if (value.trim() === '*') return '*'
  const tags: EntityTag[] = []
  ENTITY_TAG.lastIndex = 0
  while (ENTITY_TAG.lastIndex < value.length) {
    const start = ENTITY_TAG.lastIndex
    const match = ENTITY_TAG.exec(value)
    if (!match) return value.slice(start).trim() === '' ? tags : undefined
    tags.push({ weak: match[1] !== undefined, opaque: match[2]! })
  }
  return tags
}

/** Weak comparison (RFC 9110 §8.8.3.2): the opaque tags match, whatever their weakness. */
export function weakMatch(ifNoneMatch: string, etag: string | undefined): boolean {
  const tags = parseEntityTags(ifNoneMatch)
  if (tags === '*') return true
  if (!tags || etag === undefined) return false
  const current = parseEntityTags(etag)
  if (!Array.isArray(current) || current.length !== 1) return false
  return tags.some((tag) => tag.opaque === current[0]!.opaque)
}

/**
 * Should the cache answer 304 instead of `status`? Only a 2xx has a selected
 * representation to validate. `If-None-Match` takes precedence: when present,
 * `If-Modified-Since` is ignored (RFC 9110 §13.2.2).
 */
export function isNotModified(validators: Validators, status: number, headers: HeaderList): boolean {
  if (status < 200 || status > 299) return false
  if (validators.ifNoneMatch !== undefined) return weakMatch(validators.ifNoneMatch, headerOf(headers, 'etag'))
  if (validators.ifModifiedSince === undefined) return false
  const since = parseHttpDate(validators.ifModifiedSince)
  const lastModified = parseHttpDate(headerOf(headers, 'last-modified'))
  if (Number.isNaN(since) || Number.isNaN(lastModified)) return false
  return lastModified <= since
}

/**
 * The fields a 304 carries: those the 200 would have sent that RFC 9110 §15.4.5
 * requires (Content-Location, Date, ETag, Vary, Cache-Control, Expires), plus
 * Last-Modified when there is no ETag to validate with.
 */
export function notModifiedHeaders(headers: HeaderList): HeaderList {
  const keep = new Set(['content-location', 'date', 'etag', 'vary', 'cache-control', 'expires'])
  if (headerOf(headers, 'etag') === undefined) keep.add('last-modified')
  return headers.filter(([name]) => keep.has(name.toLowerCase()))
}

/** A strong validator computed from the exact stored bytes (so each encoding gets its own). */
export function strongEtag(body: Buffer): string {
  return `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"`
}

/** Is this ETag value a strong one? */
export function isStrongEtag(etag: string | undefined): boolean {
  return etag !== undefined && etag.trimStart().startsWith('"')
}
