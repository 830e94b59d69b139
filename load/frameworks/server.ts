/**
 * The child process of `npm run load -- --framework`: serves one framework's app
 * (apps.ts) on a cache over REDIS_URL, tells the parent its port, and exits when the
 * parent disconnects. It answers `{ cpu: n }` with its `process.cpuUsage()`.
 */
import { Redis } from 'ioredis'
import { createCache } from '../../src/index.js'
import { isFramework, serveFramework } from './apps.js'

const framework = process.env.FRAMEWORK ?? ''
if (!isFramework(framework)) throw new Error(`unknown framework '${framework}'`)
const redis = new Redis(process.env.REDIS_URL!)
const cache = createCache({ redis, namespace: `fw-${framework}-${process.pid}`, ttl: '10m' })
const served = await serveFramework(framework, cache)
process.send?.({ port: served.port })
// The parent asks for this process's CPU time around each measured run (CPU per request).
process.on('message', (message: { cpu?: number }) => {
  if (message.cpu !== undefined) process.send?.({ cpu: message.cpu, usage: process.cpuUsage() })
})
process.once('disconnect', () => {
  void served
    .close()
    .then(() => cache.close())
    .then(() => redis.quit())
    .finally(() => process.exit(0))
})
