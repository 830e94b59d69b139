/**
 * `npx tsx load/wait-for-replicas/run.ts [--rounds 2000]`: what `lock.waitForReplicas`
 * costs per lock acquisition, on a local primary + replica (loopback, so this is the
 * replication round trip and WAIT's own work, not a network).
 *
 * Each call is a getOrLoad of a new key with l1 off: one lookup that wins the lock, the
 * loader (returns at once), one commit. Off and on run in alternating batches of 100 on the
 * same servers, so machine noise falls on both alike. The difference is the cost of WAIT.
 *
 * The same for `withLock` on Redis (`redis: { client, waitForReplicas }`, strict): each call
 * is one uncontended withLock on a new key (acquire + WAIT in one round trip, fn returns at
 * once, release).
 */
import { parseArgs } from 'node:util'
import { createCache, createLocks } from '../../src/index.js'
import { parseInfo, startRedis, stopAllRedis } from '../../test/support/redis.js'

const { values } = parseArgs({ options: { rounds: { type: 'string', default: '2000' } } })
const rounds = Number(values.rounds)

const primary = await startRedis()
const replica = await startRedis({ args: ['--replicaof', '127.0.0.1', String(primary.port)] })
for (
  const deadline = Date.now() + 10_000;
  parseInfo(await replica.client().info('replication')).master_link_status !== 'up';
) {
  if (Date.now() > deadline) throw new Error('replica did not sync')
  await new Promise((r) => setTimeout(r, 50))
}

const caches = {
  off: createCache({ redis: primary.client(), ttl: '30s', l1: false, namespace: 'off' }),
  on: createCache({
    redis: primary.client(),
    ttl: '30s',
    l1: false,
    namespace: 'on',
    lock: { waitForReplicas: { replicas: 1, timeout: '1s' } },
  }),
}
let unreplicated = 0
caches.on.on('lock-unreplicated', () => unreplicated++)
const samples: Record<keyof typeof caches, number[]> = { off: [], on: [] }
for (let done = 0; done < rounds; done += 100) {
  for (const mode of ['off', 'on'] as const) {
    for (let i = done; i < done + 100; i++) {
      const started = performance.now()
      await caches[mode].getOrLoad(`k${i}`, async () => i)
      samples[mode].push(performance.now() - started)
    }
  }
}
const lockSets = {
  off: createLocks({ redis: primary.client(), namespace: 'lock-off' }),
  on: createLocks({
    redis: { client: primary.client(), waitForReplicas: { replicas: 1, timeout: '1s' } },
    namespace: 'lock-on',
  }),
}
const lockSamples: Record<keyof typeof lockSets, number[]> = { off: [], on: [] }
for (let done = 0; done < rounds; done += 100) {
  for (const mode of ['off', 'on'] as const) {
    for (let i = done; i < done + 100; i++) {
      const started = performance.now()
      await lockSets[mode].withLock(`k${i}`, async () => i)
      lockSamples[mode].push(performance.now() - started)
    }
  }
}
const quantile = (list: number[], q: number) => [...list].sort((a, b) => a - b)[Math.floor(q * (list.length - 1))]!
const report = (title: string, data: Record<'off' | 'on', number[]>, tail: string) => {
  const row = (mode: 'off' | 'on') =>
    `${mode.padEnd(4)} p50 ${quantile(data[mode], 0.5).toFixed(3)} ms  p90 ` +
    `${quantile(data[mode], 0.9).toFixed(3)} ms  p99 ${quantile(data[mode], 0.99).toFixed(3)} ms`
  console.log(title)
  console.log(row('off'))
  console.log(row('on'))
  const delta = (q: number) => {
    const ms = quantile(data.on, q) - quantile(data.off, q)
    return `${ms >= 0 ? '+' : ''}${ms.toFixed(3)} ms`
  }
  console.log(`WAIT cost per acquire: p50 ${delta(0.5)}, p99 ${delta(0.99)}${tail}`)
}
report(
  `lock.waitForReplicas, ${rounds} acquisitions each (lookup that wins + commit), primary + 1 replica on loopback`,
  samples,
  `; unreplicated locks: ${unreplicated}`,
)
report(
  `withLock redis.waitForReplicas (strict), ${rounds} uncontended withLock calls each (acquire + WAIT, release)`,
  lockSamples,
  '',
)
await Promise.all([...Object.values(caches), ...Object.values(lockSets)].map((c) => c.close()))
await stopAllRedis()
process.exit(0)
