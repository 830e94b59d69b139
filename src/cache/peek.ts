import { checkKey } from '../key.js'
import { CacheClosedError, RedisUnavailableError } from '../errors.js'
import { entryKeys } from './redis/keys.js'
import type { Call } from './call.js'
import type { CacheCore } from './core.js'

/** What a peek found: `found` tells a miss from a hit (a stored value may be `null`, never `undefined`). */
export interface Peeked {
  found: boolean
  value: unknown
}

const MISS: Peeked = { found: false, value: undefined }
const noLoader = () => undefined

/**
 * `get` and `has`: a read that never loads. L1's fresh copy (no round trip), else one GET
 * of Redis's fresh copy, which then fills L1 as a hit would. Only a fresh value answers: a
 * copy in grace or kept for fail-safe is what a reload would replace, so a peek calls it a
 * miss. Redis unreachable: rejects with `RedisUnavailableError` (a miss would be a guess).
 */
export async function peek(core: CacheCore, key: string): Promise<Peeked> {
  if (core.closed) throw new CacheClosedError()
  checkKey(key, core.settings.maxKeyLength)
  const now = performance.now()
  const inMemory = core.memory?.get(key)
  if (inMemory && now < inMemory.freshUntil) return { found: true, value: inMemory.value }
  const store = core.store
  if (!store) return MISS
  // A peek begun before a delete must not put the deleted value back in L1 (see remember()).
  const call: Call = { key, loader: noLoader, policy: core.settings.policy, epoch: core.deletions }
  if (!store.clock.known()) await store.syncClock() // the fresh copy's deadlines are in server time
  if (!store.clock.known()) throw new RedisUnavailableError('the Redis server clock could not be read')
  const entry = await core.entries.readFresh(key, entryKeys(core.settings.namespace, key), store)
  if (!entry) return MISS
  core.remember(call, entry)
  return { found: true, value: entry.value }
}
