/** The HTTP conformance table (cases.ts) through the koa adapter, over real HTTP. */
import { koaAdapter } from './apps/koa.js'
import { runConformance } from './suite.js'

runConformance(koaAdapter)
