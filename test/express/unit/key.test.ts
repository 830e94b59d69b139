import type { IncomingMessage } from 'node:http'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import {
  canonicalHeaderNames,
  customUrlKey,
  defaultUrlKey as urlKeyOfTarget,
  hasForeignForwardedHost,
  normalizedHeader,
  validatedHost,
  variantKey,
} from '../../../src/http/key.js'

const req = (headers: Record<string, string | string[]>, url = '/p?q=1', method = 'GET') =>
  ({ headers, url, originalUrl: url, method }) as unknown as IncomingMessage & { originalUrl: string }

/** The default key of a request: its target as received (what an adapter passes as `url`). */
const defaultUrlKey = (r: { originalUrl: string }, host: string, scheme?: 'http' | 'https') =>
  urlKeyOfTarget(r.originalUrl, host, scheme)

describe('validatedHost', () => {
  it('accepts host names, IPs and ports, lower-cased', () => {
    expect(validatedHost(req({ host: 'Shop.Example.COM:8080' }), undefined)).toBe('shop.example.com:8080')
    expect(validatedHost(req({ host: '127.0.0.1' }), undefined)).toBe('127.0.0.1')
    expect(validatedHost(req({ host: '[::1]:3000' }), undefined)).toBe('[::1]:3000')
  })

  it('refuses anything that is not a host', () => {
    for (const host of ['', 'evil.com/path', 'a b', 'evil.com@x', 'x:99999999', '-bad.com', 'a..b']) {
      expect(validatedHost(req({ host }), undefined), host).toBeUndefined()
    }
    expect(validatedHost(req({}), undefined)).toBeUndefined()
  })

  it('honours allowedHosts', () => {
    const allowed = new Set(['shop.test'])
    expect(validatedHost(req({ host: 'shop.test' }), allowed)).toBe('shop.test')
    expect(validatedHost(req({ host: 'other.test' }), allowed)).toBeUndefined()
  })
})

describe('forwarded hosts', () => {
  it('flags X-Forwarded-Host, X-Host and Forwarded host= that differ from Host', () => {
    expect(hasForeignForwardedHost(req({ host: 'shop.test', 'x-forwarded-host': 'evil.test' }), 'shop.test')).toBe(true)
    expect(
      hasForeignForwardedHost(req({ host: 'shop.test', 'x-forwarded-host': 'shop.test, evil.test' }), 'shop.test'),
    ).toBe(true)
    expect(hasForeignForwardedHost(req({ host: 'shop.test', 'x-host': 'evil.test' }), 'shop.test')).toBe(true)
    expect(
      hasForeignForwardedHost(
        req({ host: 'shop.test', forwarded: 'for=1.2.3.4;host="evil.test";proto=https' }),
        'shop.test',
      ),
    ).toBe(true)
  })

  it('accepts forwarded hosts that agree with Host', () => {
    expect(hasForeignForwardedHost(req({ host: 'shop.test', 'x-forwarded-host': 'SHOP.test' }), 'shop.test')).toBe(
      false,
    )
    expect(
      hasForeignForwardedHost(req({ host: 'shop.test', forwarded: 'for=1.2.3.4;host=shop.test' }), 'shop.test'),
    ).toBe(false)
    expect(hasForeignForwardedHost(req({ host: 'shop.test' }), 'shop.test')).toBe(false)
  })
})

describe('keys', () => {
  it('is scheme + host + raw path + full query, never the method', () => {
    expect(defaultUrlKey(req({}, '/p?b=2&a=1'), 'shop.test')).toBe('url:http://shop.test/p?b=2&a=1')
    expect(defaultUrlKey(req({}, '/p'), 'shop.test', 'https')).toBe('url:https://shop.test/p')
    expect(defaultUrlKey(req({}, '/p?b=2&a=1', 'HEAD'), 'shop.test')).toBe(
      defaultUrlKey(req({}, '/p?b=2&a=1', 'GET'), 'shop.test'),
    )
    expect(defaultUrlKey(req({}, '/p?a=1'), 'shop.test')).not.toBe(defaultUrlKey(req({}, '/p?a=2'), 'shop.test'))
  })

  it('hashes long URLs so keys stay short, without merging different ones', () => {
    const long = `/p?x=${'a'.repeat(2000)}`
    const key = defaultUrlKey(req({}, long), 'shop.test')
    expect(key.length).toBeLessThan(100)
    expect(key).not.toBe(defaultUrlKey(req({}, `${long}b`), 'shop.test'))
  })

  it('no request URL maps onto the key of a hashed URL or of a variant', () => {
    const host = 'shop.test'
    const urlOf = (key: string) => key.slice(`url:http://${host}`.length) // the URL a request would need to reach `key`
    const hashed = defaultUrlKey(req({}, `/p?x=${'a'.repeat(300)}`), host)
    expect(defaultUrlKey(req({}, urlOf(hashed)), host)).not.toBe(hashed)
    const variant = variantKey(defaultUrlKey(req({}, '/p'), host), 'g1', ['accept'], req({ accept: 'text/html' }))
    expect(defaultUrlKey(req({}, urlOf(variant)), host)).not.toBe(variant)
    const custom = customUrlKey('x'.repeat(300))
    expect(customUrlKey(custom.slice('key:'.length))).not.toBe(custom)
  })

  it('keeps custom keys apart from default ones and rejects empty ones', () => {
    expect(customUrlKey('url:shop.test/p')).toBe('key:url:shop.test/p')
    expect(() => customUrlKey('')).toThrow(TypeError)
  })

  it('derives variant keys from normalised header values; absent differs from empty', () => {
    const names = canonicalHeaderNames(['Accept-Language', 'accept-encoding', 'ACCEPT-ENCODING'])
    expect(names).toEqual(['accept-encoding', 'accept-language'])
    const a = variantKey('url:x/', 'g1', names, req({ 'accept-encoding': 'gzip', 'accept-language': 'en,  fr' }))
    const b = variantKey('url:x/', 'g1', names, req({ 'accept-encoding': 'GZIP;q=1', 'accept-language': 'en , fr' }))
    const c = variantKey('url:x/', 'g1', names, req({ 'accept-encoding': 'gzip', 'accept-language': 'fr, en' }))
    expect(a).toBe(b) // Accept-Encoding reduced to its coding; whitespace around commas collapsed
    expect(a).not.toBe(c) // order can change negotiation: not merged
    expect(variantKey('url:x/', 'g2', names, req({ 'accept-encoding': 'gzip', 'accept-language': 'en, fr' }))).not.toBe(
      a,
    )
    expect(normalizedHeader(req({}), 'accept')).toBeNull()
    expect(normalizedHeader(req({ accept: '' }), 'accept')).toBe('')
    expect(a).not.toContain('gzip') // values enter only as a digest
  })
})

describe('issue 9.3: the default key is injective', () => {
  type Tuple = {
    scheme: 'http' | 'https'
    host: string
    path: string
    query: string | undefined
    variant: string | undefined
  }

  /** The key a request for `tuple` gets, sent in origin-form (`/p?q`) or absolute-form (`http://host/p?q`). */
  function keyOf(tuple: Tuple, form: 'origin' | 'absolute'): string {
    const target = tuple.path + (tuple.query === undefined ? '' : `?${tuple.query}`)
    const request = req(
      tuple.variant === undefined ? {} : { 'x-variant': tuple.variant },
      form === 'absolute' ? `${tuple.scheme}://${tuple.host}${target}` : target,
    )
    const url = defaultUrlKey(request, tuple.host, tuple.scheme)
    return tuple.variant === undefined ? url : variantKey(url, 'g1', ['x-variant'], request)
  }

  // Small alphabets, so that the components' boundaries are where collisions would be.
  const label = fc.constantFrom('a', 'b', 'ab', 'http', 'https', '127', '0', '1')
  const host = fc
    .tuple(fc.array(label, { minLength: 1, maxLength: 3 }), fc.option(fc.constantFrom(1, 80, 8080), { nil: undefined }))
    .map(([labels, port]) => labels.join('.') + (port === undefined ? '' : `:${port}`))
  const text = (chars: string, maxLength: number) =>
    fc.array(fc.constantFrom(...chars.split('')), { maxLength }).map((list) => list.join(''))
  const tuple: fc.Arbitrary<Tuple> = fc.record({
    scheme: fc.constantFrom('http' as const, 'https' as const),
    host,
    path: fc.oneof(text('/a:.hts', 8), text('/a', 300)).map((path) => `/${path}`),
    query: fc.option(text('a=&?/:s', 8), { nil: undefined }),
    variant: fc.option(text('ab ,', 4), { nil: undefined }),
  })
  const form = fc.constantFrom('origin' as const, 'absolute' as const)

  it('distinct (scheme, host, path, query, variant) tuples never share a key, in either request form', () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.tuple(tuple, form), {
          selector: ([t]) => JSON.stringify([t.scheme, t.host, t.path, t.query ?? null, t.variant ?? null]),
          minLength: 2,
          maxLength: 40,
        }),
        (requests) => {
          const keys = new Set(requests.map(([t, f]) => keyOf(t, f)))
          expect(keys.size).toBe(requests.length)
        },
      ),
      { numRuns: 500 },
    )
  })

  it('the absolute-form of a request is keyed as its origin-form', () => {
    fc.assert(
      fc.property(tuple, (t) => keyOf(t, 'absolute') === keyOf(t, 'origin')),
      { numRuns: 500 },
    )
  })

  it("the issue's example: Host 127.0.0.1http + s://x/coll is not Host 127.0.0.1 + https://x/coll", () => {
    expect(defaultUrlKey(req({}, 's://x/coll'), '127.0.0.1http')).not.toBe(
      defaultUrlKey(req({}, 'https://x/coll'), '127.0.0.1'),
    )
  })
})
