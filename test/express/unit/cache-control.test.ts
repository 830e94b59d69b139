import { describe, expect, it } from 'vitest'
import { MAX_LIFETIME_MS } from '../../../src/duration.js'
import { deltaSeconds, forbidsStale, parseCacheControl, responseLifetime } from '../../../src/http/cache-control.js'

describe('parseCacheControl', () => {
  it('reads names case-insensitively, with and without arguments', () => {
    const directives = parseCacheControl('Public, MAX-AGE=60,s-maxage=30 , no-transform')
    expect([...directives]).toEqual([
      ['public', true],
      ['max-age', '60'],
      ['s-maxage', '30'],
      ['no-transform', true],
    ])
  })

  it('is strict where the grammar is: no whitespace around "="', () => {
    expect(parseCacheControl('max-age =3600').has('max-age')).toBe(false)
    expect(parseCacheControl('max-age= 3600').get('max-age')).toBe(' 3600')
    expect(deltaSeconds(parseCacheControl('max-age= 3600'), 'max-age')).toBeUndefined()
    expect(deltaSeconds(parseCacheControl('max-age="3600"'), 'max-age')).toBe(3_600_000)
  })

  it('keeps commas inside quoted arguments and unescapes them', () => {
    const directives = parseCacheControl('no-cache="Set-Cookie, X-Foo", private="a\\"b", max-age=5')
    expect(directives.get('no-cache')).toBe('Set-Cookie, X-Foo')
    expect(directives.get('private')).toBe('a"b')
    expect(directives.get('max-age')).toBe('5')
  })

  it('takes the first of duplicate directives and survives junk', () => {
    expect(parseCacheControl('max-age=10, max-age=99').get('max-age')).toBe('10')
    expect([...parseCacheControl(',, ,')]).toEqual([])
    expect([...parseCacheControl(undefined)]).toEqual([])
  })
})

describe('responseLifetime', () => {
  const now = Date.parse('2026-01-01T00:00:00Z')
  const lifetime = (cc: string, expires?: string, date?: string) =>
    responseLifetime(parseCacheControl(cc), expires, date, now)

  it('prefers s-maxage, then max-age, then Expires − Date', () => {
    expect(lifetime('max-age=60, s-maxage=10', 'Thu, 01 Jan 2026 01:00:00 GMT')).toBe(10_000)
    expect(lifetime('max-age=60', 'Thu, 01 Jan 2026 01:00:00 GMT')).toBe(60_000)
    expect(lifetime('', 'Thu, 01 Jan 2026 00:02:00 GMT', 'Thu, 01 Jan 2026 00:01:00 GMT')).toBe(60_000)
    expect(lifetime('', 'Thu, 01 Jan 2026 00:00:30 GMT')).toBe(30_000) // no Date: counted from now
  })

  it('treats a malformed Expires as already expired, and no statement as undefined', () => {
    expect(lifetime('', '0')).toBe(0)
    expect(lifetime('public')).toBeUndefined()
    expect(lifetime('max-age =60')).toBeUndefined() // not a max-age directive at all
  })

  it('treats invalid max-age / s-maxage as stale (RFC 9111 §4.2.1), not as absent', () => {
    for (const bad of ['abc', '-1', '1.5', "'60'", '', ' 60'])
      expect([bad, lifetime(`max-age=${bad}`)]).toEqual([bad, 0])
    expect(lifetime('max-age')).toBe(0)
    expect(lifetime('s-maxage=x, max-age=60')).toBe(0)
  })

  it('caps a delta-seconds too large to store at the longest lifetime, as RFC 9111 §1.2.2 allows', () => {
    expect(lifetime('max-age=99999999999999')).toBe(MAX_LIFETIME_MS)
    expect(deltaSeconds(parseCacheControl('stale-while-revalidate=99999999999999'), 'stale-while-revalidate')).toBe(
      MAX_LIFETIME_MS,
    )
  })
})

describe('forbidsStale', () => {
  it('is true for must-revalidate, proxy-revalidate and s-maxage', () => {
    expect(forbidsStale(parseCacheControl('must-revalidate'))).toBe(true)
    expect(forbidsStale(parseCacheControl('proxy-revalidate'))).toBe(true)
    expect(forbidsStale(parseCacheControl('s-maxage=5'))).toBe(true)
    expect(forbidsStale(parseCacheControl('max-age=5, public'))).toBe(false)
  })
})
