/** The HTTP conformance table (cases.ts) through the fastify adapter, over real HTTP. */
import { fastifyAdapter } from './apps/fastify.js'
import { runConformance } from './suite.js'

runConformance(fastifyAdapter)
