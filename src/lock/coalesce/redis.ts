import { randomBytes } from 'node:crypto'
import type { Cluster, Redis } from 'ioredis'
import { hashTag } from '../../redis/keys.js'
import { defineWithSharedScripts } from '../../redis/scripts.js'
import { boundedRedisCall } from '../redis/bounded-call.js'
import { retryThroughFailover } from '../redis/failover-retry.js'
import type { StoreSettings } from '../backend.js'
import type { CoalescedRun, CoalesceStore } from './store.js'

const SCRIPTS = {
  stampedeGuardCoalesceBegin: { file: 'begin.lua', keys: 2 },
  stampedeGuardCoalesceFinish: { file: 'finish.lua', keys: 2 },
} as const

const newOwner = () => randomBytes(16).toString('hex')

/** A finish is retried through failures, never aborted early. */
const NEVER = new AbortController().signal

/** How long a pending mark stands without a runner to take it (a runner that crashed): one day. */
const PENDING_KEEP_MS = 86_400_000

/**
 * Coalesced runs on Redis: `<ns>:{c:<name>}` holds the runner's owner with PX = lease
 * (renewed by compare-and-PEXPIRE, extend-many.lua), `:pending` marks a trigger that came
 * while it ran. begin.lua and finish.lua decide in one step each, so a trigger is either
 * seen by the runner's finish or starts a run of its own: never lost between the two,
 * never two runners.
 * @internal
 */
export function redisCoalesce(client: Redis | Cluster, settings: StoreSettings): CoalesceStore {
  const scripts = defineWithSharedScripts(client, SCRIPTS, new URL('./', import.meta.url))
  const shared = scripts
  const call = <T>(operation: string, command: () => Promise<T>) =>
    boundedRedisCall(client, settings.commandTimeoutMs, operation, command)
  return {
    async begin(name, leaseMs): Promise<CoalescedRun | undefined> {
      const running = `${settings.namespace}:${hashTag('c', 'ch', name)}`
      const pending = `${running}:pending`
      let owner = newOwner()
      const startedAt = performance.now()
      const began = await call('coalesce begin', () =>
        scripts.stampedeGuardCoalesceBegin(running, pending, owner, leaseMs, PENDING_KEEP_MS),
      )
      if (Number(began) !== 1) return undefined
      return {
        startedAt,
        renew: async (ms) =>
          (
            (await call('coalesce renew', () => shared.stampedeGuardExtendMany(1, running, owner, ms))) as number[]
          )[0] === 1,
        finish: async (ms, handOver = true) => {
          // Retried (backed off) through a timeout or a failover for up to one lease, with the
          // same `next`: finish.lua answers a retry of a finish it applied the same, so a
          // pending trigger is neither run twice nor left to a claim held by nobody.
          const next = newOwner()
          const finish = () =>
            call('coalesce finish', () =>
              scripts.stampedeGuardCoalesceFinish(running, pending, owner, ms, next, handOver ? 1 : 0),
            )
          const deadline = performance.now() + ms
          const outcome = await retryThroughFailover(finish, { failsOver: true, deadline, signal: NEVER, onRetry() {} })
          if (Number(outcome) !== 1) return Number(outcome) === 0 ? 'done' : 'lost'
          owner = next
          return 'again'
        },
      }
    },
  }
}
