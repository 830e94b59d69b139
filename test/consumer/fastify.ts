// Type-checked by scripts/consumer-check.sh after fastify is installed into the throwaway
// project (the only entry whose .d.ts import it): the plugin registers, and a route's
// `config.cache` is typed by the plugin's augmentation of Fastify's route config.
import Fastify from 'fastify'
import { createCache } from 'stampede-guard'
import { fastifyCache, type FastifyCacheRouteOptions } from 'stampede-guard/fastify'

const cache = createCache({ ttl: '1m' })
const app = Fastify()
await app.register(fastifyCache, { cache, defaults: { xCacheHeader: true } })
const options: FastifyCacheRouteOptions = { ttl: '10s', key: (request) => request.url }
app.get('/p', { config: { cache: options } }, async () => ({ ok: true }))
// @ts-expect-error: ttl is a duration, not a boolean
app.get('/q', { config: { cache: { ttl: false } } }, async () => ({ ok: true }))
export { app }
