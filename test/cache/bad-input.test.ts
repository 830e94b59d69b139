import type { Redis } from 'ioredis'
import { beforeAll, describe, expect, it } from 'vitest'
import superjson from 'superjson'
import {
  InvalidArgumentError,
  RemoteLoaderError,
  SerializationError,
  superjsonCodec,
  ValueTooLargeError,
} from '../../src/index.js'
import { decodeFailure, describeFailure, encodeFailure, MAX_ERROR_MESSAGE_LENGTH } from '../../src/loader-error.js'
import { useCacheSuite } from '../support/cache-suite.js'
import { redisAvailable } from '../support/redis.js'
import { gate, until } from '../support/timing.js'

/** Input a caller or a loader can get wrong, against a real Redis shared by two caches (two "processes"). */
describe.skipIf(!redisAvailable)('bad input', () => {
  const suite = useCacheSuite({ ttl: '1m' })
  const cache = suite.cache
  let admin: Redis
  beforeAll(() => {
    admin = suite.admin()
  })

  describe('keys that are not well-formed UTF-16', () => {
    it('are rejected, so two lone-surrogate keys cannot share one Redis entry', async () => {
      const a = cache()
      const b = cache()
      const reasons: unknown[] = []
      for (const key of ['z\uD800', 'z\uD801', '\uDC00', 'a\uDBFFb']) {
        reasons.push(await a.getOrLoad(key, async () => 'first').catch((e: unknown) => e))
        reasons.push(await b.getOrLoad(key, async () => 'second').catch((e: unknown) => e))
        reasons.push(await a.set(key, 'set').catch((e: unknown) => e))
        reasons.push(await b.delete(key).catch((e: unknown) => e))
      }
      for (const reason of reasons) {
        expect(reason).toBeInstanceOf(InvalidArgumentError)
        expect((reason as InvalidArgumentError).argument).toBe('key')
      }
      expect(await admin.keys('*')).toEqual([]) // nothing reached Redis
    })

    it('well-formed astral keys stay distinct across processes, and their delete reaches the other process', async () => {
      const a = cache()
      const b = cache()
      expect(await a.getOrLoad('z\u{1F600}', async () => 'grin')).toBe('grin')
      expect(await a.getOrLoad('z\u{1F601}', async () => 'beam')).toBe('beam')
      expect(await b.getOrLoad('z\u{1F600}', async () => 'other')).toBe('grin') // read from Redis, now in b's L1
      expect(await b.getOrLoad('z\u{1F601}', async () => 'other')).toBe('beam')
      await a.delete('z\u{1F600}')
      let seen = 'grin'
      await until(
        async () => (seen = await b.getOrLoad('z\u{1F600}', async () => 'reloaded')) !== 'grin',
        "b's L1 to drop the deleted key",
      )
      expect(seen).toBe('reloaded')
      expect(await b.getOrLoad('z\u{1F601}', async () => 'other')).toBe('beam') // its neighbour untouched
    })
  })

  describe('values the default codec cannot store unchanged (test/codec/ covers each kind)', () => {
    it('are returned to their callers and not stored, so no other process gets a changed copy', async () => {
      const a = cache()
      const b = cache()
      const reasons: string[] = []
      a.on(
        'uncacheable',
        ({ reason, error }) => (expect(error).toBeInstanceOf(SerializationError), reasons.push(reason)),
      )
      const original = { pattern: /x/, at: new Date(0) }
      expect(await a.getOrLoad('lossy', async () => original)).toBe(original)
      expect(reasons).toHaveLength(1)
      expect(reasons[0]).toMatch(/a RegExp would become a plain object \(at "pattern"\)/)
      expect(await admin.hexists('sg:{k:lossy}', 'd')).toBe(0)
      expect(await b.getOrLoad('lossy', async () => 'b loaded its own')).toBe('b loaded its own')
    })

    it('superjsonCodec stores them faithfully for every process', async () => {
      const codec = superjsonCodec(superjson)
      const a = cache({ codec })
      const b = cache({ codec })
      const value = {
        price: NaN,
        top: -Infinity,
        at: new Date(0),
        tags: new Set(['x']),
        byId: new Map([[1, 'one']]),
        bytes: new Uint8Array([1, 2]),
        holes: [undefined, 1],
        big: 10n,
      }
      expect(await a.getOrLoad('rich', async () => value)).toBe(value)
      expect(await b.getOrLoad('rich', async () => 'unused')).toEqual(value)
      expect(a.stats().uncacheable).toBe(0)
    })
  })

  describe('values above maxValueBytes', () => {
    it('by default, a value over 32 MiB goes to its callers, is not stored, and waiters elsewhere load their own', async () => {
      const a = cache()
      const b = cache()
      const big = 'x'.repeat(33 * 1024 * 1024)
      const events: unknown[] = []
      a.on('uncacheable', ({ error }) => events.push(error))
      expect(await a.getOrLoad('big', async () => big)).toBe(big)
      expect(events).toHaveLength(1)
      expect(events[0]).toBeInstanceOf(ValueTooLargeError)
      expect(await admin.hexists('sg:{k:big}', 'd')).toBe(0)
      expect(await admin.exists('sg:{k:big}:lock')).toBe(0)
      expect(await b.getOrLoad('big', async () => 'b loaded its own')).toBe('b loaded its own')
    })

    it('by default, a 4 MiB value is stored, and 10 waiters on another cache (its own connection) get it from one load', async () => {
      const a = cache()
      const b = cache()
      const big = 'x'.repeat(4 * 1024 * 1024)
      let loads = 0
      const release = gate()
      const led = a.getOrLoad('four', async () => (loads++, await release.promise, big))
      await until(async () => (await admin.exists('sg:{k:four}:lock')) === 1, 'the lock on four')
      const waiting = Array.from({ length: 10 }, () => b.getOrLoad('four', async () => (loads++, 'b loaded')))
      release.open()
      expect(await led).toBe(big)
      expect((await Promise.all(waiting)).every((value) => value === big)).toBe(true)
      expect(loads).toBe(1)
      expect(await admin.hexists('sg:{k:four}', 'd')).toBe(1)
    })

    it('counts UTF-8 bytes, not characters, and set() rejects such a value', async () => {
      const a = cache({ maxValueBytes: 1_024 })
      const accented = 'é'.repeat(600) // 600 characters, 1,202 bytes as JSON
      const error = await a.set('accented', accented).catch((e: unknown) => e)
      expect(error).toBeInstanceOf(ValueTooLargeError)
      expect((error as ValueTooLargeError).bytes).toBe(1_202)
      expect(await admin.exists('sg:{k:accented}')).toBe(0)
      await a.set('small', 'é'.repeat(500))
      expect(await admin.hexists('sg:{k:small}', 'd')).toBe(1)
    })
  })

  describe('loader errors', () => {
    it('with negativeTtl, the stored error keeps a `|` name and message intact for callers in another process', async () => {
      const a = cache({ negativeTtl: '10s' })
      const b = cache({ negativeTtl: '10s' })
      const thrown = Object.assign(new Error('row|42 missing'), { name: 'Db|Error' })
      await expect(
        a.getOrLoad('neg', async () => {
          throw thrown
        }),
      ).rejects.toBe(thrown)
      let loads = 0
      const error = await b.getOrLoad('neg', async () => (loads++, 'unused')).catch((e: unknown) => e)
      expect(error).toBeInstanceOf(RemoteLoaderError)
      expect((error as RemoteLoaderError).remoteName).toBe('Db|Error')
      expect((error as RemoteLoaderError).remoteMessage).toBe('row|42 missing')
      expect(loads).toBe(0)
    })

    it('a thrown value whose getters throw reaches its own caller unchanged, and the lock is released', async () => {
      const a = cache({ lock: { lease: '30s' } })
      const evil = new Error('hidden')
      Object.defineProperty(evil, 'name', {
        get: () => {
          throw new Error('name getter threw')
        },
      })
      Object.defineProperty(evil, 'message', {
        get: () => {
          throw new Error('message getter threw')
        },
      })
      await expect(
        a.getOrLoad('evil', async () => {
          throw evil
        }),
      ).rejects.toBe(evil)
      expect(await admin.exists('sg:{k:evil}:lock')).toBe(0)
      expect(await a.getOrLoad('evil', async () => 'retried')).toBe('retried')
    })
  })
})

describe('describing what a loader threw', () => {
  const unreadable = new Proxy(
    {},
    {
      get: () => {
        throw new Error('trap')
      },
      getPrototypeOf: () => {
        throw new Error('trap')
      },
    },
  )
  it.each([
    ['a string', 'oops', { name: 'NonError', message: 'oops' }],
    ['null', null, { name: 'NonError', message: 'null' }],
    ['undefined', undefined, { name: 'NonError', message: 'undefined' }],
    ['a symbol', Symbol('s'), { name: 'NonError', message: 'Symbol(s)' }],
    ['a bare object', Object.create(null), { name: 'Error', message: '(its message could not be read)' }],
    ['a proxy that throws on every read', unreadable, { name: 'Error', message: '(its message could not be read)' }],
    ['a plain object', { message: 'shaped like an error' }, { name: 'Object', message: 'shaped like an error' }],
    ['a TypeError', new TypeError('bad'), { name: 'TypeError', message: 'bad' }],
  ])('%s, without throwing', (_, thrown, expected) => {
    expect(describeFailure(thrown)).toEqual(expected)
    expect(decodeFailure(encodeFailure(thrown))).toEqual(expected)
  })

  it('bounds the message sent across processes', () => {
    expect(describeFailure(new Error('x'.repeat(100_000))).message).toHaveLength(MAX_ERROR_MESSAGE_LENGTH)
  })

  it('reads the older `e|name|message` frame from processes not yet upgraded', () => {
    expect(decodeFailure('e|TypeError|a|b')).toEqual({ name: 'TypeError', message: 'a|b' })
  })
})
