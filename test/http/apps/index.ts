/** Every adapter the conformance suite runs through (the cross-process and cross-adapter tests use them all). */
import type { ConformanceAdapter } from '../adapter.js'
import { expressAdapter } from './express.js'
import { fastifyAdapter } from './fastify.js'
import { honoAdapter } from './hono.js'
import { koaAdapter } from './koa.js'
import { nestExpressAdapter, nestFastifyAdapter } from './nestjs.js'

export const adapters: ConformanceAdapter[] = [
  expressAdapter,
  fastifyAdapter,
  honoAdapter,
  koaAdapter,
  nestExpressAdapter,
  nestFastifyAdapter,
]
