/**
 * The BinaryValue seam (issue 9.9): a value whose payload is bytes is stored as those
 * bytes, after a head the codec encodes, and every path back keeps them exact: a Redis
 * read, and the commit message that wakes a waiter in another cache.
 */
import { describe, expect, it } from 'vitest'
import { decodeValue, encodeValue, valueFormat } from '../../src/stored-value.js'
import { BinaryValue, CorruptValueError, createCache, jsonCodec } from '../../src/index.js'
import { redisAvailable } from '../support/redis.js'
import { useRedisServer } from '../support/redis-suite.js'
import { gate } from '../support/timing.js'

/** Every byte value, twice, and bytes that are not UTF-8. */
const BYTES = Buffer.concat([
  Buffer.from(Array.from({ length: 256 }, (_, i) => i)),
  Buffer.from([0xff, 0xfe, 0xc3, 0x28, 0x00, 0x80]),
])

const format = valueFormat(jsonCodec, undefined, 32 * 1024 * 1024)

describe('encodeValue / decodeValue', () => {
  it('round-trips a BinaryValue exactly, and leaves other values to the codec', () => {
    const encoded = encodeValue(format, new BinaryValue({ status: 200, note: 'héllo' }, BYTES))
    expect(Buffer.isBuffer(encoded)).toBe(true)
    expect((encoded as Buffer).length).toBe(BYTES.length + 9 + Buffer.byteLength('{"status":200,"note":"héllo"}'))
    const decoded = decodeValue(format, encoded as Buffer) as BinaryValue
    expect(decoded).toBeInstanceOf(BinaryValue)
    expect(decoded.head).toEqual({ status: 200, note: 'héllo' })
    expect(decoded.bytes.equals(BYTES)).toBe(true)
    expect(encodeValue(format, { a: 'héllo' })).toBe('{"a":"héllo"}')
    expect(decodeValue(format, Buffer.from('{"a":"héllo"}'))).toEqual({ a: 'héllo' })
  })

  it('refuses a truncated binary value (the core reports it corrupt: a miss)', () => {
    const encoded = encodeValue(format, new BinaryValue({ long: 'x'.repeat(50) }, BYTES)) as Buffer
    expect(() => decodeValue(format, encoded.subarray(0, 20))).toThrow(CorruptValueError)
  })
})

describe.skipIf(!redisAvailable)('BinaryValue through Redis', () => {
  const suite = useRedisServer({ shared: true })

  it('a read from Redis and a waiter woken by the commit message both get the exact bytes', async () => {
    const namespace = `binary-${process.pid}`
    const leader = createCache({ redis: suite.shared(), ttl: '30s', namespace, l1: false })
    const waiter = createCache({ redis: suite.shared(), ttl: '30s', namespace, l1: false })
    try {
      const release = gate()
      let waiting = false
      waiter.on('wait', () => (waiting = true))
      const led = leader.getOrLoad('k', async () => {
        await release.promise
        return new BinaryValue({ kind: 'blob' }, BYTES)
      })
      const woken = waiter.getOrLoad<BinaryValue>('k', () => {
        throw new Error('the waiter must not load')
      })
      while (!waiting) await new Promise((resolve) => setTimeout(resolve, 5))
      release.open()
      await led
      const fromMessage = await woken
      expect(fromMessage.head).toEqual({ kind: 'blob' })
      expect(fromMessage.bytes.equals(BYTES)).toBe(true)
      const fromRedis = await waiter.getOrLoad<BinaryValue>('k', () => {
        throw new Error('stored: no load')
      })
      expect(fromRedis.bytes.equals(BYTES)).toBe(true)
      const stored = await suite.shared().hgetallBuffer(`${namespace}:{k:k}`)
      const raw = Object.values(stored).find((value) => value.length > BYTES.length)
      expect(raw?.includes(BYTES)).toBe(true) // the bytes themselves are in Redis, not base64
    } finally {
      await leader.close()
      await waiter.close()
    }
  })

  it('the fresh hit (a GET; for a tick of hits, a GET then one MGET for the rest) reads the exact bytes, with no script', async () => {
    const namespace = `binary-get-${process.pid}`
    const writer = createCache({ redis: suite.shared(), ttl: '30s', namespace, l1: false })
    const reader = createCache({ redis: suite.shared(), ttl: '30s', namespace, l1: false })
    try {
      const keys = ['a', 'b', 'c']
      await Promise.all(keys.map((key) => writer.set(key, new BinaryValue({ key }, BYTES))))
      await reader.ready() // the server clock is known: hits take the GET path
      const calls = async (command: string) => {
        const line = (await suite.shared().info('commandstats'))
          .split('\r\n')
          .find((l) => l.startsWith(`cmdstat_${command}:`))
        return Number(/calls=(\d+)/.exec(line ?? '')?.[1] ?? 0)
      }
      const before = {
        get: await calls('get'),
        mget: await calls('mget'),
        evalsha: await calls('evalsha'),
        eval: await calls('eval'),
      }
      const noLoad = () => {
        throw new Error('stored: no load')
      }
      const one = await reader.getOrLoad<BinaryValue>('a', noLoad)
      const many = await Promise.all(keys.map((key) => reader.getOrLoad<BinaryValue>(key, noLoad)))
      for (const [i, value] of [one, ...many].entries()) {
        expect(value).toBeInstanceOf(BinaryValue)
        expect(value.head).toEqual({ key: i === 0 ? 'a' : keys[i - 1] })
        expect(value.bytes.equals(BYTES)).toBe(true)
      }
      // `one`: a GET. `many`: the first read of an idle store goes out at once (a GET), the
      // two asked for while it is in flight go together (one MGET).
      expect(await calls('get')).toBe(before.get + 2)
      expect(await calls('mget')).toBe(before.mget + 1)
      expect((await calls('evalsha')) + (await calls('eval'))).toBe(before.evalsha + before.eval) // no get-or-lock script
    } finally {
      await writer.close()
      await reader.close()
    }
  })
})
