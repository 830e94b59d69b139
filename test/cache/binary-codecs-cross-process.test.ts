/**
 * Binary codecs and compression across processes: a value stored as bytes (a BinaryCodec's,
 * compressed or not) reaches a process waiting on its load through the commit message on
 * pub/sub, and a later process through one GET, unchanged; corrupt bytes and a value of
 * another codec are reported `corrupt` (typed) and reloaded once, never a crash. Loads are
 * counted in Redis.
 */
import { describe, expect, it } from 'vitest'
import type { LoadResult } from '../../src/index.js'
import { redisAvailable } from '../support/redis.js'
import type { Worker } from '../support/workers.js'
import { until } from '../support/timing.js'
import { useWorkerSuite } from '../support/worker-suite.js'
import { ALL_BYTES, valueOf, type CodecName, type ValueKind } from '../fixtures/codec-values.js'
import type { CodecRequest } from '../fixtures/codec-worker.ts'

const WORKER = new URL('../fixtures/codec-worker.ts', import.meta.url)

interface CorruptSeen {
  key: string
  name?: string
  code?: string
  message?: string
}

describe.skipIf(!redisAvailable)('binary codecs and compression across processes', () => {
  const suite = useWorkerSuite(WORKER)
  const redis = suite.redis

  function spawn(codec: CodecName, options: object = {}): Promise<Worker> {
    return suite.spawn(1, { CODEC: codec, CACHE_OPTIONS: JSON.stringify(options) }).then(([worker]) => worker!)
  }
  const ask = <T>(worker: Worker, request: CodecRequest) => worker.request<T>(request)
  const load = (worker: Worker, key: string, kind: ValueKind, tag: string, releaseKey?: string) =>
    ask<LoadResult<unknown>>(worker, { op: 'load', key, kind, tag, releaseKey })
  const loads = async (key: string) => Number((await redis().get(`loads:${key}`)) ?? 0)
  const subscribers = async (key: string) =>
    ((await redis().pubsub('NUMSUB', `sg:{k:${key}}:ch`)) as [string, number])[1]
  /** The fresh copy's value part: what follows `x|s|e|l|t|f|`. */
  async function storedData(key: string): Promise<Buffer> {
    const record = (await redis().getBuffer(`sg:{k:${key}}:v`))!
    let at = 0
    for (let bars = 0; bars < 6; bars++) at = record.indexOf('|', at) + 1
    return record.subarray(at)
  }

  /**
   * A loads `key` and holds its loader until told; B waits on it (subscribed to its channel);
   * then C, started after the commit, hits Redis. Returns what each got.
   */
  async function leaderWaiterReader(
    [a, b, c]: [Worker, Worker, Worker],
    key: string,
    kind: ValueKind,
  ): Promise<LoadResult<unknown>[]> {
    const leading = load(a, key, kind, 'v1', `go:${key}`)
    await until(async () => (await loads(key)) === 1, 'the leader to start loading', 15_000)
    const waiting = load(b, key, kind, 'never')
    await until(async () => (await subscribers(key)) === 1, 'the waiter to subscribe', 15_000)
    await redis().set(`go:${key}`, '1')
    const [led, waited] = await Promise.all([leading, waiting])
    const read = await load(c, key, kind, 'never')
    return [led!, waited!, read]
  }

  it('a Buffer (a BinaryCodec of bytes): stored as its bytes, exact through pub/sub and a GET, 1 load', async () => {
    const workers = [await spawn('bytes'), await spawn('bytes'), await spawn('bytes')] as const
    const results = await leaderWaiterReader([...workers], 'blob', 'bytes')
    const expected = valueOf('bytes', 'v1') as Buffer
    // The waiter subscribed before the leader was let go, but its re-check may still find the commit: either way no load.
    expect(results.map((r) => r.outcome)).toEqual(['loaded', expect.stringMatching(/^(coalesced|hit)$/), 'hit'])
    for (const { value } of results) expect(Buffer.from(value as Uint8Array).equals(expected)).toBe(true)
    expect(await loads('blob')).toBe(1)
    // The bytes themselves after the codec's mark (\0sgc, length, "bytes"): no base64, no UTF-8.
    const data = await storedData('blob')
    expect(data.subarray(0, 10).equals(Buffer.from('\0sgc\x05bytes', 'latin1'))).toBe(true)
    expect(data.subarray(10).equals(expected)).toBe(true)
    expect(ALL_BYTES.length).toBeGreaterThan(256)
    for (const worker of workers) expect(await ask<CorruptSeen[]>(worker, { op: 'corrupt' })).toEqual([])
  })

  it('msgpack: Date, Map, Set, BigInt, Buffer, NaN and holes come back as they were, 1 load', async () => {
    const workers = [await spawn('msgpack'), await spawn('msgpack'), await spawn('msgpack')] as const
    const results = await leaderWaiterReader([...workers], 'rich', 'rich')
    // The waiter subscribed before the leader was let go, but its re-check may still find the commit: either way no load.
    expect(results.map((r) => r.outcome)).toEqual(['loaded', expect.stringMatching(/^(coalesced|hit)$/), 'hit'])
    const { bytes, ...rest } = valueOf('rich', 'v1') as { bytes: Buffer }
    for (const { value } of results) {
      const { bytes: gotBytes, ...gotRest } = value as { bytes: Uint8Array }
      expect(gotRest).toEqual(rest)
      expect((gotRest as { when: unknown }).when).toBeInstanceOf(Date)
      expect((gotRest as { lookup: unknown }).lookup).toBeInstanceOf(Map)
      expect(Buffer.from(gotBytes).equals(bytes)).toBe(true)
    }
    expect(await loads('rich')).toBe(1)
    expect((await storedData('rich')).subarray(0, 12).toString('latin1')).toBe('\0sgc\x07msgpack')
  })

  it('compression: a 200 KB JSON value stored ~10× smaller, read by processes with compression off too', async () => {
    const writer = await spawn('json', { compression: true })
    const waiter = await spawn('json') // compression off: reads the compressed value all the same
    const reader = await spawn('json', { l1: false })
    const results = await leaderWaiterReader([writer, waiter, reader], 'big', 'rows')
    // The waiter subscribed before the leader was let go, but its re-check may still find the commit: either way no load.
    expect(results.map((r) => r.outcome)).toEqual(['loaded', expect.stringMatching(/^(coalesced|hit)$/), 'hit'])
    const expected = valueOf('rows', 'v1')
    for (const { value } of results) expect(value).toEqual(expected)
    expect(await loads('big')).toBe(1)
    const json = Buffer.byteLength(JSON.stringify(expected))
    const data = await storedData('big')
    expect(data.subarray(0, 5).toString('latin1')).toBe('\0sgzb') // brotli
    expect(data.readUInt32BE(5)).toBe(json)
    expect(json).toBeGreaterThan(200_000)
    expect(data.length).toBeLessThan(json / 8)
    const memory = Number(await redis().call('MEMORY', 'USAGE', 'sg:{k:big}:v'))
    expect(memory).toBeLessThan(json / 4)
    // A small value is not compressed: below minBytes (16 KiB).
    await load(writer, 'small', 'plain', 'v1')
    expect((await storedData('small')).toString()).toBe('{"tag":"v1"}')
  })

  it('corrupt compressed bytes: reported as CorruptValueError, one reload, no crash', async () => {
    const writer = await spawn('json', { compression: { algorithm: 'gzip', minBytes: 1024 } })
    const reader = await spawn('json', { l1: false })
    await load(writer, 'big', 'rows', 'v1')
    // Flip bytes inside the compressed stream, in the fresh copy and in the entry's hash.
    const data = await storedData('big')
    const record = (await redis().getBuffer('sg:{k:big}:v'))!
    const at = record.length - data.length
    for (let i = at + 40; i < at + 60; i++) record[i] = record[i]! ^ 0x5a
    await redis().set('sg:{k:big}:v', record, 'KEEPTTL')
    await redis().hset('sg:{k:big}', 'd', record.subarray(at))
    const reloaded = await load(reader, 'big', 'rows', 'v2')
    expect(reloaded.outcome).toBe('loaded')
    expect(reloaded.value).toEqual(valueOf('rows', 'v2'))
    expect(await loads('big')).toBe(2)
    const seen = await ask<CorruptSeen[]>(reader, { op: 'corrupt' })
    expect(seen.length).toBeGreaterThanOrEqual(1)
    expect(seen.every((s) => s.key === 'big' && s.code === 'ERR_SG_CORRUPT_VALUE')).toBe(true)
    expect(seen[0]!.message).toMatch(/cannot be decompressed/)
  })

  it('a compressed value whose header claims more than maxValueBytes is corrupt, never inflated', async () => {
    const writer = await spawn('json', { compression: { minBytes: 0 } })
    const reader = await spawn('json', { l1: false, maxValueBytes: 100_000 })
    await load(writer, 'big', 'rows', 'v1') // 260 KB before compression: above the reader's limit
    const reloaded = await load(reader, 'big', 'plain', 'v2')
    expect(reloaded).toEqual({ value: { tag: 'v2' }, outcome: 'loaded' })
    const seen = await ask<CorruptSeen[]>(reader, { op: 'corrupt' })
    expect(seen[0]).toMatchObject({ key: 'big', code: 'ERR_SG_CORRUPT_VALUE' })
    expect(seen[0]!.message).toMatch(/above maxValueBytes \(100000\)/)
  })

  it('mixed codecs: a msgpack value read with the JSON codec (and back) is a CodecMismatchError, one reload each', async () => {
    const packer = await spawn('msgpack', { l1: false })
    const jsoner = await spawn('json', { l1: false })
    await load(packer, 'k', 'plain', 'packed')
    const read = await load(jsoner, 'k', 'plain', 'json')
    expect(read).toEqual({ value: { tag: 'json' }, outcome: 'loaded' })
    expect(await loads('k')).toBe(2)
    const byJson = await ask<CorruptSeen[]>(jsoner, { op: 'corrupt' })
    expect(byJson[0]).toMatchObject({
      key: 'k',
      name: 'CodecMismatchError',
      code: 'ERR_SG_CODEC_MISMATCH',
      message: 'stored value is corrupt: written by the binary codec "msgpack", read with a text codec',
    })
    // And the other way round: the JSON value is no msgpack value.
    const back = await load(packer, 'k', 'plain', 'packed again')
    expect(back).toEqual({ value: { tag: 'packed again' }, outcome: 'loaded' })
    expect(await loads('k')).toBe(3)
    const byPacker = await ask<CorruptSeen[]>(packer, { op: 'corrupt' })
    expect(byPacker[0]).toMatchObject({
      code: 'ERR_SG_CODEC_MISMATCH',
      message: 'stored value is corrupt: written by a text codec, read with the binary codec "msgpack"',
    })
  })

  it('mixed binary codecs: a waiter of another codec gets no garbage from the commit message', async () => {
    const packer = await spawn('msgpack')
    const bytes = await spawn('bytes')
    const leading = load(packer, 'k', 'plain', 'packed', 'go:k')
    await until(async () => (await loads('k')) === 1, 'the leader to start loading', 15_000)
    const waiting = bytes.request<LoadResult<unknown>>({ op: 'load', key: 'k', kind: 'bytes', tag: 'own' })
    await until(async () => (await subscribers('k')) === 1, 'the waiter to subscribe', 15_000)
    await redis().set('go:k', '1')
    expect((await leading).value).toEqual({ tag: 'packed' })
    const waited = await waiting
    expect(Buffer.from(waited.value as Uint8Array).equals(valueOf('bytes', 'own') as Buffer)).toBe(true)
    expect(await loads('k')).toBe(2)
    const seen = await ask<CorruptSeen[]>(bytes, { op: 'corrupt' })
    expect(seen.length).toBeGreaterThanOrEqual(1)
    expect(seen.every((s) => s.code === 'ERR_SG_CODEC_MISMATCH')).toBe(true)
  })
})
