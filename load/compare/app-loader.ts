/**
 * The load-test app's item loader for `npm run compare` (the workers import it through
 * LOAD_ITEM_LOADER): the run's mode names a cache peer (caches.ts), built in each worker
 * over the counted database query.
 *
 * Stale answers are counted here, the same way for every peer: an answer whose value the
 * database read more than ttl + STALE_SLACK_MS ago. The slack covers the moment between
 * the read and the cache storing it (its ttl starts then), so a fresh answer is never
 * counted as stale.
 */
import { cachePeer } from './caches.js'
import type { ItemLoader, ItemLoaderDeps, RunConfig } from './from-load.js'

export const STALE_SLACK_MS = 20

export async function createItemLoader(run: RunConfig, deps: ItemLoaderDeps): Promise<ItemLoader> {
  const redisUrl = process.env.LOAD_REDIS_URL
  if (!redisUrl) throw new Error('npm run compare needs Redis (LOAD_REDIS_URL is empty)')
  const cache = await cachePeer(run.mode).create(
    { redisUrl, namespace: run.namespace, ttlMs: run.cache.ttl, staleMs: run.cache.staleTtl, l1Max: 10_000 },
    (key) => deps.queryDatabase(Number(key)),
  )
  let stale = 0
  return {
    async get(id) {
      const item = (await cache.get(String(id))) as Awaited<ReturnType<ItemLoader['get']>>
      if (Date.now() - item.loadedAt > run.cache.ttl + STALE_SLACK_MS) stale++
      return item
    },
    stats: () => ({ stale }),
    close: () => cache.close(),
  }
}
