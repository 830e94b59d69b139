import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createCache } from '../../src/index.js'
import { redisAvailable, startRedis, type RedisServer } from '../support/redis.js'
import { sleep } from '../support/timing.js'
import { cacheParts } from '../../src/cache/cache.js'
import type { Redis } from 'ioredis'
import { scriptFiles, scriptOf } from '../support/script-calls.js'
import { commandsSinceReset } from '../support/command-stats.js'

/** How old a served value may be: no older than ttl + its load + a little, in every process (issue 8). */
describe.skipIf(!redisAvailable)('no value outlives its ttl by more than a reload', () => {
  let server: RedisServer
  beforeAll(async () => {
    server = await startRedis()
  })
  afterAll(async () => {
    await server?.stop()
  })

  it('an L1 copy past ttl asks Redis first: a value another process already reloaded is a hit, not stale', async () => {
    const [ra, rb] = [server.client(), server.client()]
    const options = { ttl: 300, staleTtl: '30s', namespace: 'fr1', ttlJitter: 0 }
    const a = createCache({ redis: ra, ...options })
    const b = createCache({ redis: rb, ...options })
    await Promise.all([a.ready(), b.ready()])
    await a.getOrLoad('k', async () => 'old')
    expect(await b.getOrLoad('k', async () => 'unused')).toBe('old') // in b's L1 now
    await sleep(400) // both copies past ttl, in grace
    // a reloads: stale at once, the refresh commits in the background.
    expect(await a.getOrLoadResult('k', async () => 'new')).toEqual({ value: 'old', outcome: 'stale' })
    for (let i = 0; i < 200 && (await ra.exists('fr1:{k:k}:v')) === 0; i++) await sleep(10)
    let bLoads = 0
    // b's L1 copy is in grace, but Redis has the new value: b serves it, fresh.
    expect(await b.getOrLoadResult('k', async () => (bLoads++, 'b-load'))).toEqual({ value: 'new', outcome: 'hit' })
    expect(bLoads).toBe(0)
    expect(b.stats().stale).toBe(0)
    await Promise.all([a.close(), b.close()])
    ra.disconnect()
    rb.disconnect()
  })

  it('an L1 copy past ttl costs one round trip: the get-or-lock script, with no GET of the fresh copy before it', async () => {
    const r = server.client()
    const a = createCache({ redis: r, ttl: 200, staleTtl: '30s', namespace: 'fr-trip', ttlJitter: 0 })
    await a.ready()
    await a.getOrLoad('k', async () => 'old')
    await sleep(300) // past ttl, in grace: Redis's fresh copy has expired too
    const sent = countSent(r)
    let finish: ((value: string) => void) | undefined
    const reload = () => new Promise<string>((resolve) => (finish = resolve))
    expect(await a.getOrLoadResult('k', reload)).toEqual({ value: 'old', outcome: 'stale' }) // a reloads in the background
    expect(sent).toEqual(['get-or-lock.lua']) // before: a GET of the fresh copy (a miss), then the script
    for (let i = 0; i < 200 && !finish; i++) await sleep(5)
    finish!('new')
    for (let i = 0; i < 200 && (await a.getOrLoad('k', reload)) !== 'new'; i++) await sleep(10)
    expect(await a.getOrLoad('k', reload)).toBe('new')
    await a.close()
    r.disconnect()
  })

  it('an L1 copy past ttl whose key another process reloaded meanwhile: the script answers the fresh value, a hit', async () => {
    const [ra, rb] = [server.client(), server.client()]
    const options = { ttl: 200, staleTtl: '30s', namespace: 'fr-trip2', ttlJitter: 0 }
    const a = createCache({ redis: ra, ...options })
    const b = createCache({ redis: rb, ...options, earlyRefresh: false })
    await Promise.all([a.ready(), b.ready()])
    await a.getOrLoad('k', async () => 'old')
    await b.getOrLoad('k', async () => 'unused')
    await sleep(300)
    await a.getOrLoad('k', async () => 'new') // stale; a reloads in the background
    for (let i = 0; i < 200 && (await ra.exists('fr-trip2:{k:k}:v')) === 0; i++) await sleep(10)
    const sent = countSent(rb)
    const admin = server.client()
    await admin.config('RESETSTAT')
    expect(await b.getOrLoadResult('k', async () => 'b-load')).toEqual({ value: 'new', outcome: 'hit' })
    expect(sent).toEqual(['get-or-lock.lua'])
    // a's commit wrote the fresh copy, expiring with the value: the script keeps it (it rewrote
    // it, a SET of the whole value, on every such call before)
    expect(await commandsSinceReset(admin)).not.toHaveProperty('set')
    expect(await ra.get('fr-trip2:{k:k}:v')).toMatch(/\|"new"$/)
    admin.disconnect()
    expect(await b.getOrLoadResult('k', async () => 'b-load')).toEqual({ value: 'new', outcome: 'hit' }) // from L1 now
    expect(sent).toEqual(['get-or-lock.lua'])
    await Promise.all([a.close(), b.close()])
    ra.disconnect()
    rb.disconnect()
  })

  it('while another process reloads, a copy in grace is still served stale, and the reload runs once', async () => {
    const [ra, rb] = [server.client(), server.client()]
    const options = { ttl: 200, staleTtl: '30s', namespace: 'fr2', ttlJitter: 0 }
    const a = createCache({ redis: ra, ...options })
    const b = createCache({ redis: rb, ...options })
    await Promise.all([a.ready(), b.ready()])
    await a.getOrLoad('k', async () => 'old')
    await b.getOrLoad('k', async () => 'unused')
    await sleep(300)
    let loads = 0
    let finish!: () => void
    const slow = () => new Promise<string>((resolve) => (loads++, (finish = () => resolve('new'))))
    expect(await a.getOrLoadResult('k', slow)).toEqual({ value: 'old', outcome: 'stale' }) // a holds the lock, loading
    for (let i = 0; i < 200 && loads === 0; i++) await sleep(10)
    const answers = await Promise.all(Array.from({ length: 5 }, () => b.getOrLoadResult('k', slow)))
    expect(answers).toEqual(Array(5).fill({ value: 'old', outcome: 'stale' }))
    finish()
    for (let i = 0; i < 300 && (await b.getOrLoad('k', slow)) !== 'new'; i++) await sleep(10)
    expect(await b.getOrLoad('k', slow)).toBe('new')
    expect(loads).toBe(1)
    await Promise.all([a.close(), b.close()])
    ra.disconnect()
    rb.disconnect()
  })

  it('ttlJitter moves the stale windows with the ttl: with staleTtl and staleIfError 0 there are none', async () => {
    const redis = server.client()
    const cache = createCache({ redis, ttl: '10s', ttlJitter: 0.5, namespace: 'fr3' })
    await Promise.all(Array.from({ length: 20 }, (_, i) => cache.set(`j${i}`, i)))
    for (let i = 0; i < 20; i++) {
      const [x, s, e] = (await redis.hmget(`fr3:{k:j${i}}`, 'x', 's', 'e')).map(Number)
      expect(s).toBe(x) // no grace
      expect(e).toBe(x) // no fail-safe window
    }
    await cache.close()
    redis.disconnect()
  })

  it('a commit message read late gives L1 only what is left of the ttl, not a whole ttl', async () => {
    const redis = server.client()
    const cache = createCache({ redis, ttl: '1s', namespace: 'fr4' })
    await cache.ready() // the server clock is known
    const [seconds, micros] = await redis.time()
    const serverNow = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000)
    const published = serverNow - 600 // committed 600 ms ago, with a 1 s ttl: 400 ms left
    const x = published + 1_000
    const message = Buffer.from(`c|${published}|${x}|${x}|${x}|5|1000|7|"v"`)
    const entry = cacheParts(cache).core.entries.decodeCommitMessage('k', message)!
    expect(entry.value).toBe('v')
    const left = entry.freshUntil - performance.now()
    expect(left).toBeLessThanOrEqual(450) // not 1,000
    expect(left).toBeGreaterThan(200)
    await cache.close()
    redis.disconnect()
  })
})

/** What `client` sends from now on: each command's name, a script by its file. */
function countSent(client: Redis): string[] {
  const files = scriptFiles()
  const sent: string[] = []
  const send = client.sendCommand.bind(client)
  client.sendCommand = ((command: { name: string; args: unknown[] }, ...rest: unknown[]) => {
    sent.push(scriptOf(command, files) ?? command.name.toLowerCase())
    return (send as (...a: unknown[]) => unknown)(command, ...rest)
  }) as typeof client.sendCommand
  return sent
}
