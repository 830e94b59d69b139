/** The HTTP conformance table (cases.ts) through the Nest interceptor on both of Nest's platforms, over real HTTP. */
import { nestExpressAdapter, nestFastifyAdapter } from './apps/nestjs.js'
import { runConformance } from './suite.js'

runConformance(nestExpressAdapter)
runConformance(nestFastifyAdapter)
