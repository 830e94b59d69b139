/**
 * Leader election for a scheduler, and a read-write lock for a config reload.
 *
 *   REDIS_URL=redis://127.0.0.1:6379 npx tsx examples/leader-scheduler.ts
 *
 * Three app instances (three clients here; three processes or hosts in production) share
 * one Redis. They campaign for "scheduler": only the leader runs the scheduled job, and it
 * stamps each run with its term (the fencing token), so a deposed leader's late write is
 * refused. Halfway, the leader steps down (a deploy) and another takes over. Meanwhile the
 * instances read their config under a read lock while one reloads it under the write
 * lock: a reader never sees half of an old config and half of a new one.
 */
import { setTimeout as sleep } from 'node:timers/promises'
import { Redis } from 'ioredis'
import { createLocks, schedule, type Leadership } from '../src/index.js' // in your project: from 'stampede-guard'

if (!process.env.REDIS_URL) {
  console.error('this example needs a Redis: REDIS_URL=redis://127.0.0.1:6379 npx tsx examples/leader-scheduler.ts')
  process.exit(1)
}
const TICKS = 10
const clients = [1, 2, 3].map(() => new Redis(process.env.REDIS_URL!))
const instances = clients.map((redis) => createLocks({ redis, namespace: 'example-leader', lease: '2s' }))
const admin = clients[0]!
await admin.del('example:ticks', 'example:fence', 'example:config:a', 'example:config:b')

// The job's output, fenced: a write with a term older than the newest seen is refused.
const fencedWrite = `
if tonumber(ARGV[1]) < tonumber(redis.call('GET', KEYS[1]) or '0') then return 0 end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('RPUSH', KEYS[2], ARGV[2])
return 1`

// --- The scheduler: runs only while leading ------------------------------------------------
let ticksRun = 0
const leaders: { id: string; term: bigint }[] = []
async function leadTheScheduler(leadership: Leadership): Promise<void> {
  leaders.push({ id: leadership.id, term: leadership.term })
  const ticks = await schedule(
    async (tick) => {
      if (!leadership.leading) return // checked against the clock, right before the side effect
      const ok = await admin.eval(fencedWrite, 2, 'example:fence', 'example:ticks', String(leadership.term), tick.index)
      if (ok === 1) ticksRun++
    },
    { every: 100, signal: leadership.signal },
  )
  // A deploy: the first leader steps down after 5 ticks; the next one runs to the end.
  while (!leadership.signal.aborted && ticksRun < (leaders.length === 1 ? TICKS / 2 : TICKS)) await sleep(20)
  await ticks.stop() // returning ends the term: elect() resigns, and this instance campaigns again
}

const candidacy = new AbortController()
const observer = instances[0]!.observe('scheduler')
const reported = (async () => {
  for await (const leader of observer)
    console.log(leader ? `observed: ${leader.id} leads (term ${leader.term})` : 'observed: nobody leads')
})()
for (const [i, locks] of instances.entries())
  locks
    .elect('scheduler', { id: `instance-${i + 1}`, onElected: leadTheScheduler, signal: candidacy.signal })
    .catch(() => {}) // a candidate never elected rejects with the signal's reason when the candidacy ends

// --- The config: many readers, one reloader --------------------------------------------------
let reads = 0
let tornReads = 0
async function readConfig(i: number): Promise<void> {
  await instances[i]!.readWrite('config').read(async () => {
    const [a, b] = await Promise.all([admin.get('example:config:a'), admin.get('example:config:b')])
    reads++
    if (a !== b) tornReads++ // half old, half new: what the write lock prevents
  })
}
async function reloadConfig(version: number): Promise<void> {
  await instances[0]!.readWrite('config').write(async () => {
    await admin.set('example:config:a', `v${version}`)
    await sleep(15) // the two halves of a config are written apart
    await admin.set('example:config:b', `v${version}`)
  })
}
const readers = [0, 1, 2].map(async (i) => {
  while (ticksRun < TICKS) {
    await readConfig(i)
    await sleep(10)
  }
})
for (let version = 1; version <= 3; version++) {
  await sleep(250)
  await reloadConfig(version)
}
await Promise.all(readers)
candidacy.abort()

const terms = leaders.map((l) => l.term)
const increasing = terms.every((term, i) => i === 0 || term > terms[i - 1]!)
const written = await admin.llen('example:ticks')
console.log(
  `scheduler: ${written} ticks written by ${leaders.length} leaders in turn (${leaders.map((l) => l.id).join(' → ')}), terms ${increasing ? 'increasing' : 'NOT increasing'}`,
)
console.log(`config: 3 reloads under the write lock, ${reads} reads under read locks, ${tornReads} torn reads`)
await observer.close()
await reported
await Promise.all(instances.map((locks) => locks.close())) // resigns a leader still in office
await Promise.all(clients.map((redis) => redis.quit()))
if (!increasing || tornReads !== 0 || leaders.length < 2 || written < TICKS) process.exit(1)
