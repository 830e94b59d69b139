/** Every adapter the conformance suite runs through (the cross-process and cross-adapter tests use them all). */
import type { ConformanceAdapter } from '../adapter.js'
import { expressAdapter } from './express.js'
import { fastifyAdapter } from './fastify.js'
import { honoAdapter } from './hono.js'

export const adapters: ConformanceAdapter[] = [expressAdapter, fastifyAdapter, honoAdapter]
