import type { Cluster, Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createCache, type Cache, type CacheStats } from '../../src/index.js'
import type { ReadReport, ReadRequest } from '../fixtures/tag-worker.js'
import { redisAvailable } from '../support/redis.js'
import { startCluster, type RedisClusterHandle } from '../support/redis-cluster.js'
import { until } from '../support/timing.js'
import { forkWorker, type Worker } from '../support/workers.js'
import { useWorkerSuite } from '../support/worker-suite.js'

const WORKER = new URL('../fixtures/tag-worker.ts', import.meta.url)

interface Setup {
  workers: Worker[]
  /** A client on the same Redis, for the "database" and the load counters. */
  admin: Redis | Cluster
  /** The cache of the process that writes: no L1, so what it reads is what Redis holds. */
  writer: Cache
  /** Publishes a tag message after everything published so far, on every master (a Cluster relays each master's messages in order). */
  mark(marker: string): Promise<void>
}

const TAG = 'product:1'
const warm = Object.fromEntries([
  ...Array.from({ length: 6 }, (_, i) => [`listing:${i}`, { tags: [TAG, 'listings'] }]),
  ...Array.from({ length: 4 }, (_, i) => [`late:${i}`, { tags: [TAG], ctx: true }]),
  ...Array.from({ length: 2 }, (_, i) => [`untagged:${i}`, { tags: [] }]),
]) as ReadRequest['keys']
const inFlight = Object.fromEntries(
  Array.from({ length: 4 }, (_, i) => [`slow:${i}`, { tags: [TAG] }]),
) as ReadRequest['keys']
const tagged = (key: string) => !key.startsWith('untagged')

const loadsOf = async (admin: Redis | Cluster, keys: string[]) =>
  Object.fromEntries(
    await Promise.all(keys.map(async (key) => [key, Number((await admin.get(`loads:${key}`)) ?? 0)] as const)),
  )
const read = (worker: Worker, keys: ReadRequest['keys'], loaderMs: number) =>
  worker.request<ReadReport>({ op: 'read', keys, loaderMs } satisfies ReadRequest)
const versions = (report: ReadReport) =>
  Object.fromEntries(
    Object.entries(report.values).map(([key, value]) => [key, typeof value === 'string' ? value : value.version]),
  )

/**
 * 4 processes hold tagged entries in L1 and Redis; loads of other tagged keys are in flight
 * when the database changes and another process calls deleteByTag. Afterwards every
 * process's next call gets the new version (a reload or another process's reload), never
 * the old one, from Redis or from its L1; untagged entries are untouched.
 */
async function invalidateWhileLoading({ workers, admin, writer, mark }: Setup): Promise<void> {
  await admin.set('db:version', '1')
  const all = [...Object.keys(warm), ...Object.keys(inFlight)]
  // Warm: each key loaded once across the 4 processes, then served from every L1.
  const first = await Promise.all(workers.map((worker) => read(worker, warm, 50)))
  for (const report of first) expect(Object.values(versions(report))).toEqual(Object.keys(warm).map(() => 1))
  expect(Object.values(await loadsOf(admin, Object.keys(warm)))).toEqual(Object.keys(warm).map(() => 1))
  const again = await Promise.all(workers.map((worker) => read(worker, warm, 50)))
  expect(again.map((report) => report.l1Hits)).toEqual(workers.map(() => Object.keys(warm).sort()))

  // Slow loads of other tagged keys start (reading version 1), in every process.
  const slow = Promise.all(workers.map((worker) => read(worker, inFlight, 1_500)))
  await until(
    async () => Object.values(await loadsOf(admin, Object.keys(inFlight))).every((count) => count >= 1),
    'the slow loads to start',
    15_000,
  )
  await admin.set('db:version', '2') // the write...
  await writer.deleteByTag(TAG) // ...then the invalidation, while those loads run
  const loadsAtInvalidation = await loadsOf(admin, all)
  const during = await slow
  for (const report of during) for (const value of Object.values(versions(report))) expect([1, 2]).toContain(value) // concurrent with it: either

  await mark('barrier')
  expect(
    await Promise.all(
      workers.map((worker) => worker.request<boolean>({ op: 'heard', tag: 'barrier', count: 1, timeoutMs: 10_000 })),
    ),
  ).toEqual(workers.map(() => true))

  // Every process's next call: its L1 dropped the tagged entries, Redis holds none loaded before.
  const after = await Promise.all(workers.map((worker) => read(worker, { ...warm, ...inFlight }, 50)))
  for (const report of after) {
    expect(versions(report)).toEqual(Object.fromEntries(all.map((key) => [key, tagged(key) ? 2 : 1])))
    // Of the warm keys, only the untagged ones were still in L1 (the slow ones may be there with version 2).
    expect(report.l1Hits.filter((key) => key in warm)).toEqual(
      Object.keys(warm)
        .filter((key) => !tagged(key))
        .sort(),
    )
  }
  // And what Redis holds now (the writer has no L1): nothing loaded again.
  for (const key of all) {
    const tags = (warm[key] ?? inFlight[key])!.tags
    const value = await writer.getOrLoad<{ version: number }>(
      key,
      async () => {
        throw new Error(`${key} should be stored`)
      },
      { tags },
    )
    expect([key, value.version]).toEqual([key, tagged(key) ? 2 : 1])
  }
  // Counted loads: every tagged key reloaded, each a few times at most (loads within
  // tagClockSkew of the invalidation, or refused in flight, are retried); untagged ones never.
  const loadsAfter = await loadsOf(admin, all)
  const reloads = Object.fromEntries(all.map((key) => [key, loadsAfter[key]! - loadsAtInvalidation[key]!]))
  console.log('loads after deleteByTag, per key:', JSON.stringify(reloads))
  for (const key of all) {
    if (tagged(key)) {
      expect(reloads[key], key).toBeGreaterThanOrEqual(1)
      expect(reloads[key], key).toBeLessThanOrEqual(workers.length)
    } else {
      expect(reloads[key], key).toBe(0)
    }
  }
  // Each slow load that began before the invalidation was refused its commit.
  const stats = await Promise.all(workers.map((worker) => worker.request<CacheStats>({ op: 'stats' })))
  expect(stats.reduce((sum, s) => sum + s.fenced, 0)).toBeGreaterThanOrEqual(Object.keys(inFlight).length)
  expect(stats.every((s) => s['tag-invalidated'] >= 2)).toBe(true) // the tag, and the marker
}

describe.skipIf(!redisAvailable)('tags across processes', () => {
  const suite = useWorkerSuite(WORKER)

  it('4 processes: deleteByTag while loads are in flight; every next call gets the new version, from Redis and every L1', async () => {
    const workers = await suite.spawn(4)
    const writer = createCache({ redis: suite.redis(), ttl: '30s', l1: false })
    try {
      await writer.ready()
      await invalidateWhileLoading({
        workers,
        admin: suite.redis(),
        writer,
        mark: async (marker) => void (await suite.redis().publish('sg:__tag_invalidations', `test|${marker}`)),
      })
    } finally {
      await writer.close()
    }
  })
})

describe.skipIf(!redisAvailable)('tags across processes on Redis Cluster', () => {
  let cluster: RedisClusterHandle
  beforeAll(async () => {
    cluster = await startCluster({ masters: 3 })
  })
  afterAll(async () => {
    await cluster?.stop()
  })

  it('4 processes on a 3-master Cluster: the same, with tags and keys on other slots than each other', async () => {
    const env = { REDIS_CLUSTER: JSON.stringify(cluster.startupNodes) }
    const workers = await Promise.all(Array.from({ length: 4 }, () => forkWorker(WORKER, { env })))
    const admin = cluster.client()
    const writer = createCache({ redis: cluster.client(), ttl: '30s', l1: false })
    try {
      await writer.ready()
      const masters = await cluster.masters()
      await invalidateWhileLoading({
        workers,
        admin,
        writer,
        mark: async (marker) => {
          for (const master of masters) await cluster.admin(master).publish('sg:__tag_invalidations', `test|${marker}`)
        },
      })
      // The tag's names and the entries it lists really are on different masters.
      const owners = new Set(
        await Promise.all(
          [`sg:tag:{t:${TAG}}:at`, 'sg:{k:listing:0}', 'sg:{k:listing:1}', 'sg:{k:slow:0}', 'sg:{k:late:0}'].map(
            async (key) => (await cluster.ownerOf(key)).master.port,
          ),
        ),
      )
      expect(owners.size).toBeGreaterThan(1)
    } finally {
      await writer.close()
      await Promise.all(workers.map((worker) => worker.stop()))
    }
  })
})
