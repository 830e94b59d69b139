/** The HTTP conformance table (cases.ts) through the express adapter, over real HTTP. */
import { expressAdapter } from './apps/express.js'
import { runConformance } from './suite.js'

runConformance(expressAdapter)
