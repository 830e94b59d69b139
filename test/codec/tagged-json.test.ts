/**
 * The default codec (src/tagged-json.ts): plain JSON stays byte for byte what
 * JSON.stringify writes; Date, BigInt, Map, Set, NaN/±Infinity and undefined in arrays
 * round-trip; what it cannot give back is refused with its reason; corrupt data throws.
 */
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { jsonCodec } from '../../src/index.js'
import { MalformedTaggedJsonError, UnencodableValueError } from '../../src/tagged-json.js'

const roundTrip = (value: unknown) => jsonCodec.decode(jsonCodec.encode(value))

describe('plain JSON values', () => {
  it('are stored exactly as JSON.stringify writes them (any JSON value)', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        const text = jsonCodec.encode(value)
        expect(text).toBe(JSON.stringify(value))
        expect(jsonCodec.decode(text)).toEqual(JSON.parse(text))
      }),
      { numRuns: 500 },
    )
  })

  it('keep keys that start with "~" as they are, and read back what was stored before this codec', () => {
    const value = { '~d': 1, '~': 'tilde', a: ['~x'] }
    expect(jsonCodec.encode(value)).toBe('{"~d":1,"~":"tilde","a":["~x"]}')
    expect(jsonCodec.decode('{"~d":1,"~":"tilde","a":["~x"]}')).toEqual(value)
  })

  it('-0 is stored as 0, and an undefined property is left out, as JSON does', () => {
    expect(jsonCodec.encode({ z: -0, u: undefined, n: 1 })).toBe('{"z":0,"n":1}')
  })
})

describe('values JSON would change, stored tagged', () => {
  it('a row with a Date comes back with a Date', () => {
    const row = { id: 1, updatedAt: new Date('2026-01-02T03:04:05.678Z') }
    const text = jsonCodec.encode(row)
    expect(text).toBe('~{"id":1,"updatedAt":{"~d":1767323045678}}')
    const back = jsonCodec.decode(text) as typeof row
    expect(back.updatedAt).toBeInstanceOf(Date)
    expect(back).toEqual(row)
  })

  it.each([
    ['a Date', new Date(0)],
    ['an Invalid Date', new Date(NaN)],
    ['a BigInt', { big: -12345678901234567890n }],
    [
      'a Map with object keys',
      new Map<unknown, unknown>([
        [{ a: 1 }, 'x'],
        ['k', new Date(5)],
      ]),
    ],
    ['a Set', new Set([1, 'two', null])],
    ['NaN and ±Infinity', [NaN, Infinity, -Infinity]],
    ['undefined in an array', [1, undefined, 3]],
    ['undefined as a Map value and a Set member', { m: new Map([['k', undefined]]), s: new Set([undefined]) }],
    ['nested: a Set of Maps of Dates', new Set([new Map([['at', new Date(1)]])])],
    ['a tagged value beside keys that start with "~"', { '~d': 'mine', '~~x': 1, '~': 2, at: new Date(3) }],
  ])('%s', (_, value) => {
    expect(roundTrip(value)).toEqual(value)
  })

  it('a hole in an array reads back as undefined', () => {
    const back = roundTrip([1, , 3]) as unknown[] // eslint-disable-line no-sparse-arrays
    expect(back).toHaveLength(3)
    expect(back[1]).toBeUndefined()
  })

  it('an own "__proto__" key stays a key next to a tag and never sets the prototype', () => {
    const value = JSON.parse('{"__proto__":{"polluted":true},"at":1}') as Record<string, unknown>
    value.at = new Date(1)
    value['~k'] = 2 // makes the decoder rebuild this object to unescape the key
    const back = roundTrip(value) as Record<string, unknown>
    expect(Object.getPrototypeOf(back)).toBe(Object.prototype)
    expect(Object.keys(back)).toEqual(['__proto__', 'at', '~k'])
    expect(Object.getOwnPropertyDescriptor(back, '__proto__')?.value).toEqual({ polluted: true })
    expect(({} as Record<string, unknown>).polluted).toBeUndefined()
    expect(back.at).toEqual(new Date(1))
  })

  it('random JSON with Dates, BigInts, Maps and Sets mixed in round-trips', () => {
    const leaf = fc.oneof(
      // -0 is stored as 0 (see above), which toEqual tells apart: normalise it away.
      fc.jsonValue().map((json) => JSON.parse(JSON.stringify(json)) as unknown),
      fc.date({ noInvalidDate: true }),
      fc.bigInt(),
      fc.constantFrom(NaN, Infinity, -Infinity),
    )
    const tree = fc.letrec((tie) => ({
      node: fc.oneof(
        { depthSize: 'small' },
        leaf,
        fc.array(tie('node'), { maxLength: 4 }),
        fc.dictionary(fc.string({ maxLength: 4 }), tie('node'), { maxKeys: 4 }),
        fc
          .array(fc.tuple(fc.string({ maxLength: 3 }), tie('node')), { maxLength: 3 })
          .map((entries) => new Map(entries)),
        fc.array(tie('node'), { maxLength: 3 }).map((items) => new Set(items)),
      ),
    })).node
    fc.assert(
      fc.property(tree, (value) => {
        expect(roundTrip(value)).toEqual(value)
      }),
      { numRuns: 300 },
    )
  })
})

describe('refused, saying why and where', () => {
  class Point {
    constructor(readonly x: number) {}
  }
  class Stamp extends Date {}
  const circular: Record<string, unknown> = { a: 1 }
  circular.self = circular
  const selfMap = new Map<string, unknown>()
  selfMap.set('me', selfMap)
  it.each([
    ['a class instance', { p: new Point(1) }, 'a Point would become a plain object', '"p"'],
    ['a subclass of Date', { at: new Stamp(0) }, 'a Stamp would become what its toJSON() returns', '"at"'],
    ['a typed array', { b: new Uint8Array(2) }, 'a Uint8Array would become a plain object', '"b"'],
    ['a Buffer', { b: Buffer.from('x') }, 'a Buffer would become what its toJSON() returns', '"b"'],
    ['a RegExp', { re: /x/ }, 'a RegExp would become a plain object', '"re"'],
    [
      'a toJSON of its own',
      { o: { toJSON: () => 'x' } },
      'an object with toJSON() would become what it returns',
      '"o"',
    ],
    ['a method', { f() {} }, 'a function cannot be stored', '"f"'],
    ['a symbol in an array', [Symbol('s')], 'a symbol cannot be stored', '"0"'],
    ['a class instance inside a Map', new Map([['k', new Point(2)]]), 'a Point would become a plain object', '"1"'],
    ['a cycle', circular, 'a circular reference cannot be stored', undefined],
    ['a Map inside itself', selfMap, 'a Map or Set nested too deeply (or in itself)', undefined],
  ])('%s', (_, value, reason, at) => {
    let thrown: unknown
    try {
      jsonCodec.encode(value)
    } catch (error) {
      thrown = error
    }
    expect(thrown).toBeInstanceOf(UnencodableValueError)
    expect((thrown as UnencodableValueError).reason).toBe(reason)
    if (at) expect((thrown as Error).message).toContain(`(at ${at})`)
    expect((thrown as Error).message).toContain('use superjsonCodec')
  })

  it('undefined on its own', () => {
    expect(() => jsonCodec.encode(undefined)).toThrow(UnencodableValueError)
  })
})

describe('corrupt data', () => {
  it.each([
    ['truncated plain JSON', '{"a":', SyntaxError],
    ['truncated tagged JSON', '~{"a":{"~d":1', SyntaxError],
    ['an unknown tag', '~{"a":{"~z":1}}', MalformedTaggedJsonError],
    ['a Date tag with a string', '~{"~d":"yesterday"}', MalformedTaggedJsonError],
    ['a BigInt tag with a float', '~{"~b":"1.5"}', MalformedTaggedJsonError],
    ['a Map tag with a bad entry', '~{"~m":[[1,2,3]]}', MalformedTaggedJsonError],
    ['a Set tag without an array', '~{"~s":{}}', MalformedTaggedJsonError],
    ['a number tag with a finite number', '~{"~n":"5"}', MalformedTaggedJsonError],
    ['an undefined tag with a body', '~{"~u":1}', MalformedTaggedJsonError],
    ['a tag beside other keys', '~{"~d":1,"b":2}', MalformedTaggedJsonError],
    ['only the marker', '~', SyntaxError],
  ])('%s throws', (_, text, type) => {
    expect(() => jsonCodec.decode(text)).toThrow(type)
  })
})
