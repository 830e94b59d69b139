import { describe, expect, it } from 'vitest'
import {
  isNotModified,
  notModifiedHeaders,
  parseEntityTags,
  strongEtag,
  weakMatch,
} from '../../../src/http/conditional.js'
import type { HeaderList } from '../../../src/http/headers.js'

describe('If-None-Match', () => {
  it('parses lists, weak tags, commas inside tags, and *', () => {
    expect(parseEntityTags('"a", W/"b" ,"c,d"')).toEqual([
      { weak: false, opaque: 'a' },
      { weak: true, opaque: 'b' },
      { weak: false, opaque: 'c,d' },
    ])
    expect(parseEntityTags(' * ')).toBe('*')
    expect(parseEntityTags('"a", garbage')).toBeUndefined()
  })

  it('uses the weak comparison: weakness on either side does not matter', () => {
    expect(weakMatch('W/"x"', '"x"')).toBe(true)
    expect(weakMatch('"x"', 'W/"x"')).toBe(true)
    expect(weakMatch('"a", "x"', '"x"')).toBe(true)
    expect(weakMatch('"y"', '"x"')).toBe(false)
    expect(weakMatch('*', undefined)).toBe(true)
    expect(weakMatch('"x"', undefined)).toBe(false)
  })
})

describe('isNotModified', () => {
  const headers: HeaderList = [
    ['ETag', '"v1"'],
    ['Last-Modified', 'Wed, 01 Jan 2025 00:00:00 GMT'],
  ]
  const later = 'Thu, 02 Jan 2025 00:00:00 GMT'
  const earlier = 'Tue, 31 Dec 2024 00:00:00 GMT'

  it('answers If-None-Match, which takes precedence over If-Modified-Since', () => {
    expect(isNotModified({ ifNoneMatch: '"v1"', ifModifiedSince: undefined }, 200, headers)).toBe(true)
    expect(isNotModified({ ifNoneMatch: '"v2"', ifModifiedSince: later }, 200, headers)).toBe(false)
  })

  it('answers If-Modified-Since alone by Last-Modified', () => {
    expect(isNotModified({ ifNoneMatch: undefined, ifModifiedSince: later }, 200, headers)).toBe(true)
    expect(isNotModified({ ifNoneMatch: undefined, ifModifiedSince: earlier }, 200, headers)).toBe(false)
    expect(isNotModified({ ifNoneMatch: undefined, ifModifiedSince: 'not a date' }, 200, headers)).toBe(false)
  })

  it('only validates 2xx responses', () => {
    expect(isNotModified({ ifNoneMatch: '*', ifModifiedSince: undefined }, 404, headers)).toBe(false)
  })
})

describe('304 headers and strong ETags', () => {
  it('keeps exactly the fields RFC 9110 §15.4.5 requires', () => {
    const all: HeaderList = [
      ['Content-Type', 'text/plain'],
      ['ETag', '"1"'],
      ['Vary', 'Accept'],
      ['Cache-Control', 'max-age=5'],
      ['Expires', 'x'],
      ['Date', 'y'],
      ['Content-Location', '/z'],
      ['Last-Modified', 'w'],
      ['X-Other', '1'],
    ]
    expect(notModifiedHeaders(all).map(([name]) => name)).toEqual([
      'ETag',
      'Vary',
      'Cache-Control',
      'Expires',
      'Date',
      'Content-Location',
    ])
    expect(notModifiedHeaders([['Last-Modified', 'w']]).map(([name]) => name)).toEqual(['Last-Modified'])
  })

  it('derives a strong ETag from the exact bytes', () => {
    const tag = strongEtag(Buffer.from('abc'))
    expect(tag).toMatch(/^"[A-Za-z0-9_-]{27}"$/)
    expect(strongEtag(Buffer.from('abc'))).toBe(tag)
    expect(strongEtag(Buffer.from('abd'))).not.toBe(tag)
  })
})
