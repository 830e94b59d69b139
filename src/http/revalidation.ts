import { headerOf, withoutFields, type HeaderList } from './headers.js'

/**
 * Revalidation (RFC 9111 §4.3), framework-free: the conditional request a stale stored
 * response allows, and how a 304 updates it (§4.3.4).
 */

/** The request validators a stored response allows: its `ETag` and `Last-Modified`; undefined when it has neither. */
export function conditionalFor(stored: HeaderList): { ifNoneMatch?: string; ifModifiedSince?: string } | undefined {
  const etag = headerOf(stored, 'etag')
  const lastModified = headerOf(stored, 'last-modified')
  if (etag === undefined && lastModified === undefined) return undefined
  return {
    ...(etag === undefined ? {} : { ifNoneMatch: etag }),
    ...(lastModified === undefined ? {} : { ifModifiedSince: lastModified }),
  }
}

/** Does a response carry a validator (so that, once stale, it can be revalidated instead of fetched)? */
export function hasValidator(headers: HeaderList): boolean {
  return conditionalFor(headers) !== undefined
}

/**
 * Fields a 304 must not change in the stored response (§3.2: they describe the stored
 * body or this one connection).
 */
const KEPT_ON_UPDATE = ['content-length', 'content-encoding', 'content-range', 'transfer-encoding', 'trailer']

/**
 * The stored response's headers updated by a 304's (§4.3.4): every field the 304 carries
 * replaces the stored one of that name, except those describing the body.
 */
export function updatedByNotModified(stored: HeaderList, notModified: HeaderList): HeaderList {
  const update = withoutFields(notModified, KEPT_ON_UPDATE)
  const replaced = new Set(update.map(([name]) => name.toLowerCase()))
  return [...stored.filter(([name]) => !replaced.has(name.toLowerCase())), ...update]
}
