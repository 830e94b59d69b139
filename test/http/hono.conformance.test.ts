/** The HTTP conformance table (cases.ts) through the hono adapter, over real HTTP. */
import { honoAdapter } from './apps/hono.js'
import { runConformance } from './suite.js'

runConformance(honoAdapter)
