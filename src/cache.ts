// The cache lives in src/cache/ (see docs/architecture.md); this keeps `./cache.js` imports working.
export { Cache, createCache } from './cache/cache.js'
export type { LoadOutcome, LoadResult } from './cache/call.js'
