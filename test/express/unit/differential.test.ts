/**
 * Differential property test against http-cache-semantics (an independent implementation
 * of RFC 9111): for the same request and response, the same "storable" and "fresh"
 * answers from the shared-cache policy, except the deliberate differences listed in
 * docs/express.md (Deliberate differences from RFC 9111), each excluded here by name.
 */
import fc from 'fast-check'
import CachePolicy from 'http-cache-semantics'
import { describe, expect, it } from 'vitest'
import { judgeResponse, type ResponsePolicy } from '../../../src/http/response-policy.js'
import type { HeaderList } from '../../../src/http/headers.js'

const policy: ResponsePolicy = {
  ttl: 24 * 3600_000, // the route ttl only applies when the response states no lifetime
  maxTtl: 365 * 24 * 3600_000,
  honorCacheControl: true,
  statuses: new Set([200, 203, 204, 300, 301, 308, 404, 405, 410, 414, 501]),
  targetedFields: ['cdn-cache-control'],
  revalidateTtl: 300_000,
  etag: 'keep',
}

const directive = fc.oneof(
  fc.integer({ min: 0, max: 7200 }).map((n) => `max-age=${n}`),
  fc.integer({ min: 0, max: 7200 }).map((n) => `s-maxage=${n}`),
  fc.constantFrom('no-store', 'private', 'no-cache', 'public', 'must-revalidate', 'proxy-revalidate', 'immutable'),
)

const exchange = fc.record({
  status: fc.constantFrom(200, 203, 204, 300, 301, 404, 410),
  // One of each name: with duplicates we take the first (RFC 9111 §4.2.1 allows it), http-cache-semantics the last.
  cacheControl: fc.option(fc.uniqueArray(directive, { maxLength: 3, selector: (d) => d.split('=')[0] }), {
    nil: undefined,
  }),
  expiresIn: fc.option(fc.integer({ min: -3600, max: 3600 }), { nil: undefined }),
  age: fc.option(fc.integer({ min: 0, max: 7200 }), { nil: undefined }),
  etag: fc.boolean(),
})

describe('differential: judgeResponse vs http-cache-semantics (shared cache)', () => {
  it('agrees on storable and fresh, but for the documented differences', () => {
    fc.assert(
      fc.property(exchange, ({ status, cacheControl, expiresIn, age, etag }) => {
        const now = Math.floor(Date.now() / 1000) * 1000 // Date has whole seconds: no apparent age
        const headers: Record<string, string> = { date: new Date(now).toUTCString() }
        if (cacheControl?.length) headers['cache-control'] = cacheControl.join(', ')
        if (expiresIn !== undefined) headers.expires = new Date(now + expiresIn * 1000).toUTCString()
        if (age !== undefined) headers.age = String(age)
        if (etag) headers.etag = '"v1"'
        const theirs = new CachePolicy(
          { method: 'GET', url: '/r', headers: { host: 'shop.test' } },
          { status, headers },
          { shared: true, immutableMinTimeToLive: 0 }, // RFC 8246 immutable does not lengthen freshness
        )
        const list: HeaderList = Object.entries(headers)
        const ours = judgeResponse(
          { status, headers: list, body: Buffer.alloc(0), requestTime: now, responseTime: now },
          policy,
        )

        const directives = new Set((cacheControl ?? []).map((d) => d.split('=')[0]))
        const statesLifetime = directives.has('max-age') || directives.has('s-maxage') || expiresIn !== undefined
        const theirTtl = theirs.timeToLive()
        // Difference 2: proxy-revalidate means must-revalidate for a shared cache (RFC 9111
        // §5.2.2.8): fresh until its lifetime ends. http-cache-semantics reads it as max-age=0.
        if (directives.has('proxy-revalidate') && theirTtl <= 0) return
        // Difference 1: a response stale on arrival or marked no-cache, with no validator to
        // revalidate it with, is not stored (it could never be reused).
        const unusable = !etag && (directives.has('no-cache') || (statesLifetime && theirTtl <= 0))
        if (unusable) {
          expect(ours.storable).toBe(false)
          return
        }
        expect(ours.storable).toBe(theirs.storable())
        if (!ours.storable || !statesLifetime) return // without a stated lifetime, the route ttl stands in for heuristics
        const oursFresh = !directives.has('no-cache') && (ours.life.ttl ?? 0) > 1
        expect(oursFresh).toBe(theirTtl > 0)
      }),
      { numRuns: 2000 },
    )
  })
})
