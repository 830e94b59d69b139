import { afterAll, describe, expect, it } from 'vitest'
import { redisAvailable, startRedis, stopAllRedis } from './redis.js'
import { startCluster } from './redis-cluster.js'
import { forkWorker } from './workers.js'

const pidAlive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

describe.skipIf(!redisAvailable)('test support', () => {
  afterAll(stopAllRedis)

  it('runs two servers at once, stops them by pid, restarts on the same port', async () => {
    const [a, b] = await Promise.all([startRedis(), startRedis()])
    expect(a.port).not.toBe(b.port)
    expect(a.pid).not.toBe(b.pid)
    expect([a.port, b.port]).not.toContain(6379)

    const ca = a.client()
    const cb = b.client()
    await ca.set('k', 'a')
    await cb.set('k', 'b')
    expect(await ca.get('k')).toBe('a')
    expect(await cb.get('k')).toBe('b')
    expect(await ca.call('DEBUG', 'SLEEP', '0')).toBe('OK')

    const oldPid = a.pid
    await a.stop()
    expect(pidAlive(oldPid)).toBe(false)
    await a.restart()
    expect(a.pid).not.toBe(oldPid)
    const again = a.client()
    expect(await again.ping()).toBe('PONG')
    expect(await again.get('k')).toBeNull() // nothing persisted

    const bPid = b.pid
    await b.kill()
    expect(pidAlive(bPid)).toBe(false)
    await Promise.all([a.stop(), b.stop()]) // stop() after kill() still disconnects b's clients
  })

  it('pause() makes the server hang until resume()', async () => {
    const r = await startRedis()
    const c = r.client({ commandTimeout: 300, maxRetriesPerRequest: 0 })
    await c.ping()
    r.pause()
    await expect(c.ping()).rejects.toThrow(/timed out/i)
    r.resume()
    await expect(c.ping()).resolves.toBe('PONG')
    await r.stop()
  })

  it('forks a worker that PINGs a redis and replies', async () => {
    const r = await startRedis()
    const t0 = performance.now()
    const worker = await forkWorker(new URL('./fixtures/ping-worker.ts', import.meta.url), {
      env: { REDIS_URL: r.url },
    })
    console.log(`worker ready in ${Math.round(performance.now() - t0)} ms`)
    expect(await worker.request({ op: 'ping' })).toEqual({ pid: worker.pid, pong: 'PONG' })
    await expect(worker.request({ op: 'fail' })).rejects.toThrow(/requested failure/)
    worker.kill()
    expect(await worker.exited).toBeNull()
    await expect(worker.request({ op: 'ping' })).rejects.toThrow(/not running/)
    await r.stop()
  })

  it('starts a 3-master cluster and SET/GETs through ioredis Cluster', async () => {
    const cluster = await startCluster()
    try {
      expect(cluster.nodes).toHaveLength(3)
      const c = cluster.client()
      // keys chosen to land on different masters
      for (const key of ['a', 'b', 'c', 'foo', 'bar']) {
        await c.set(key, `v-${key}`)
        expect(await c.get(key)).toBe(`v-${key}`)
      }
      const perNode = await Promise.all(cluster.nodes.map((n) => n.client().dbsize()))
      expect(perNode.filter((n) => n > 0).length).toBeGreaterThan(1)
    } finally {
      await cluster.stop()
    }
  })
})
