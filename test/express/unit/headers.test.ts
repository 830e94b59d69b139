import { describe, expect, it } from 'vitest'
import { HeaderMap, parseHttpDate, withoutHopByHop } from '../../../src/http/headers.js'
import { ownForm, storedForm } from '../../../src/http/stored-form.js'

describe('HeaderMap', () => {
  it('behaves like ServerResponse headers: case-insensitive, first spelling kept, validated', () => {
    const map = new HeaderMap()
    map.set('Content-Type', 'text/plain')
    map.set('content-type', 'text/html')
    map.append('Link', '<a>')
    map.append('link', '<b>')
    expect(map.toList()).toEqual([
      ['Content-Type', 'text/html'],
      ['Link', ['<a>', '<b>']],
    ])
    expect(map.get('CONTENT-TYPE')).toBe('text/html')
    expect(() => map.set('Bad Name', 'x')).toThrow()
    expect(() => map.set('X', 'a\nb')).toThrow()
  })
})

describe('hop-by-hop headers (RFC 9111 §3.1)', () => {
  it('drops the fixed set, Proxy-*, and the fields Connection names', () => {
    const kept = withoutHopByHop([
      ['Connection', 'close, X-Trace'],
      ['Keep-Alive', 'timeout=5'],
      ['Transfer-Encoding', 'chunked'],
      ['Upgrade', 'h2c'],
      ['Proxy-Authenticate', 'Basic'],
      ['Proxy-Foo', '1'],
      ['X-Trace', 'abc'],
      ['TE', 'trailers'],
      ['Trailer', 'X'],
      ['Content-Type', 'text/plain'],
      ['ETag', '"1"'],
    ])
    expect(kept).toEqual([
      ['Content-Type', 'text/plain'],
      ['ETag', '"1"'],
    ])
  })
})

describe('stored form', () => {
  const snapshot = {
    status: 200,
    headers: [
      ['X-Powered-By', 'Express'],
      ['Content-Type', 'text/plain'],
      ['Age', '99'],
      ['Connection', 'keep-alive'],
    ] as Array<[string, string]>,
    body: Buffer.from([0, 1, 2, 255]),
  }

  it("keeps only the handler chain's own headers, and records removals", () => {
    const own = ownForm({ ...snapshot, headers: snapshot.headers.slice(1) }, [
      ['X-Powered-By', 'Express'],
      ['X-Request-Id', 'r1'],
    ])
    expect(own.headers).toEqual([
      ['Content-Type', 'text/plain'],
      ['Age', '99'], // its own Age is kept; only the stored form turns it into initialAgeMs
    ])
    expect(own.removedHeaders).toEqual(['x-powered-by', 'x-request-id'])
  })

  it('stores the exact bytes (the captured buffer, no copy) with a Date, and applies the ETag policy', () => {
    const stored = storedForm(snapshot, [['X-Powered-By', 'Express']], 'strong', Date.parse('2026-01-01T00:00:00Z'))
    expect(stored.body).toBe(snapshot.body)
    expect(stored.headers.map(([name]) => name)).toEqual(['Content-Type', 'ETag', 'Date'])
    expect(stored.headers.find(([name]) => name === 'Date')![1]).toBe('Thu, 01 Jan 2026 00:00:00 GMT')
    const weak = { ...snapshot, headers: [...snapshot.headers, ['ETag', 'W/"w"']] as Array<[string, string]> }
    expect(storedForm(weak, [], 'keep').headers).toContainEqual(['ETag', 'W/"w"'])
    expect(storedForm(weak, [], 'strong').headers.find(([name]) => name === 'ETag')![1]).toMatch(/^"/)
    expect(storedForm(weak, [], false).headers.some(([name]) => name === 'ETag')).toBe(false)
  })
})

describe('parseHttpDate', () => {
  it('reads two-digit RFC 850 years with the 50-year rule (RFC 9110 §5.6.7)', () => {
    const now = Date.parse('2026-12-04T00:00:00Z')
    expect(new Date(parseHttpDate('Thursday, 18-Aug-50 08:49:37 GMT', now)).getUTCFullYear()).toBe(2050)
    expect(new Date(parseHttpDate('Sunday, 18-Aug-80 08:49:37 GMT', now)).getUTCFullYear()).toBe(1980)
    expect(new Date(parseHttpDate('Friday, 04-Dec-26 00:00:00 GMT', now)).getUTCFullYear()).toBe(2026)
  })

  it('reads the three HTTP-date forms and nothing else', () => {
    const at = Date.UTC(1994, 10, 6, 8, 49, 37)
    expect(parseHttpDate('Sun, 06 Nov 1994 08:49:37 GMT')).toBe(at)
    expect(parseHttpDate('Sunday, 06-Nov-94 08:49:37 GMT')).toBe(at)
    expect(parseHttpDate('Sun Nov  6 08:49:37 1994')).toBe(at)
    for (const junk of ['0', '-1', '2026-01-01', 'tomorrow', '']) expect(parseHttpDate(junk), junk).toBeNaN()
  })
})
