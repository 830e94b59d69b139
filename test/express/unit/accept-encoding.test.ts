import { describe, expect, it } from 'vitest'
import { reducedAcceptEncoding } from '../../../src/http/accept-encoding.js'

describe('reducedAcceptEncoding', () => {
  it('picks the supported coding with the highest q; ties go br, gzip, identity', () => {
    const cases: Array<[string | undefined, string | undefined]> = [
      ['gzip, br', 'br'],
      ['br,gzip', 'br'],
      ['GZIP', 'gzip'],
      ['x-gzip', 'gzip'],
      ['gzip;q=1.0', 'gzip'],
      ['br;q=0.5, gzip', 'gzip'],
      ['gzip;q=0.8, identity;q=0.9', 'identity'],
      ['deflate', 'identity'],
      ['*', 'br'],
      ['*;q=0.5, gzip', 'gzip'],
      ['', 'identity'],
      [undefined, 'identity'],
      ['gzip;q=0, br;q=0', 'identity'],
    ]
    for (const [header, coding] of cases) expect(reducedAcceptEncoding(header), String(header)).toBe(coding)
  })

  it('is undefined when the client refuses identity: nothing a handler may always send is acceptable', () => {
    expect(reducedAcceptEncoding('zstd, identity;q=0')).toBeUndefined()
    expect(reducedAcceptEncoding('zstd, *;q=0')).toBeUndefined()
    expect(reducedAcceptEncoding('gzip, identity;q=0')).toBeUndefined()
  })

  it('ignores members with a malformed q, and joins field lines', () => {
    expect(reducedAcceptEncoding('br;q=2, gzip')).toBe('gzip')
    expect(reducedAcceptEncoding('br;q=abc')).toBe('identity')
    expect(reducedAcceptEncoding(['gzip;q=0.5', 'br;q=0.6'])).toBe('br')
  })

  it('is idempotent, so the value the handler sees maps to the same variant', () => {
    for (const coding of ['br', 'gzip', 'identity']) expect(reducedAcceptEncoding(coding)).toBe(coding)
  })
})
