import { randomBytes } from 'node:crypto'
import type { Cluster, Redis } from 'ioredis'
import { hashTag } from '../../redis/keys.js'
import { registerScripts } from '../../redis/scripts.js'
import type { Claim, ClaimStore, StoreSettings } from '../backend.js'
import { boundedRedisCall } from './bounded-call.js'

const SCRIPTS = {
  stampedeGuardClaim: { file: 'claim.lua', keys: 1 },
  stampedeGuardFinishClaim: { file: 'finish-claim.lua', keys: 1 },
  stampedeGuardExtendClaim: { file: 'extend-claim.lua', keys: 1 },
} as const

/**
 * The claim key of a job: `<ns>:{o:<name>}`, a space apart from the locks' `{l:…}` and
 * `{lh:…}` tags (and the cache's); a name with a brace is hashed, as lock keys are.
 */
export function claimKey(namespace: string, name: string): string {
  return `${namespace}:${hashTag('o', 'oh', name)}`
}

/**
 * Run-once claims on Redis: `SET NX PX lockAtMostFor` with the claim time from Redis
 * `TIME` (claim.lua), and lockAtLeastFor applied by the server's clock when the run ends
 * (finish-claim.lua). A claim is a single key, so it lives on one node of a Cluster.
 * @internal
 */
export function redisClaims(client: Redis | Cluster, settings: StoreSettings): ClaimStore {
  const scripted = registerScripts(client, SCRIPTS, new URL('./scripts/', import.meta.url))
  return {
    async claim(name: string, atMostMs: number): Promise<Claim | undefined> {
      const key = claimKey(settings.namespace, name)
      const owner = randomBytes(16).toString('hex')
      let claimedAt: unknown
      try {
        claimedAt = await boundedRedisCall(client, settings.commandTimeoutMs, 'run-once claim', () =>
          scripted.stampedeGuardClaim(key, owner, atMostMs),
        )
      } catch (error) {
        // unanswered: the claim may still land (replayed after a reconnect); undo it behind us
        scripted.stampedeGuardFinishClaim(key, owner, 0).catch(() => {})
        throw error
      }
      if (claimedAt === null) return undefined
      return {
        async finish(atLeastMs: number): Promise<void> {
          await boundedRedisCall(client, settings.commandTimeoutMs, 'run-once finish', () =>
            scripted.stampedeGuardFinishClaim(key, owner, atLeastMs),
          )
        },
        async extend(atMostMs: number): Promise<boolean> {
          const extended = await boundedRedisCall(client, settings.commandTimeoutMs, 'run-once extend', () =>
            scripted.stampedeGuardExtendClaim(key, owner, atMostMs),
          )
          return Number(extended) === 1
        },
      }
    },
  }
}
