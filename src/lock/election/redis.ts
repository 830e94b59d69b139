import type { Cluster, Redis } from 'ioredis'
import { keyPrefixOf } from '../../redis/keys.js'
import { lockKeys } from '../redis/keys.js'
import type { Notifier } from '../../redis/notifier.js'
import type { ServerProbe } from '../../redis/server-probe.js'
import { RedisLockBackend } from '../redis/backend.js'
import { boundedRedisCall } from '../redis/bounded-call.js'
import type { RedisLockSettings } from '../redis/options.js'
import type { StoreSettings } from '../backend.js'
import type { ElectionStore, Leader, LeaderFeed, LeaderReading } from './store.js'

/**
 * Leader election on Redis: a candidate holds the Redis lock `<namespace>:election:{l:<name>}`
 * for as long as it leads (the same lock as `createLocks({ redis })`'s: fencing token from
 * the acquire script, compare-and-PEXPIRE renewals, compare-and-delete release that
 * publishes). Its id rides in the lock's value, `<owner>|<id>:<term>`. A new leader
 * publishes `e` on the lock's channel, a resignation publishes `r`; an observer re-reads
 * on either, and at the leader's PTTL (a crashed leader publishes nothing).
 * @internal
 */
export function redisElection(
  client: Redis | Cluster,
  settings: StoreSettings,
  redis: RedisLockSettings,
  notifier: Notifier,
  probe: ServerProbe,
): ElectionStore {
  const namespace = `${settings.namespace}:election`
  const candidates = new RedisLockBackend(client, { ...settings, namespace }, redis)
  const bounded = <T>(operation: string, command: () => Promise<T>) =>
    boundedRedisCall(client, settings.commandTimeoutMs, operation, command)
  return {
    candidates,
    async announce(name) {
      // PUBLISH arguments get no keyPrefix from ioredis; the release script's channel (a key) and the subscriber's do.
      const channel = keyPrefixOf(client) + lockKeys(namespace, name).channel
      const sharded = await probe.shardedPubSub()
      await bounded('election announce', () =>
        sharded ? (client as Cluster).spublish(channel, 'e') : client.publish(channel, 'e'),
      )
    },
    async feed(name): Promise<LeaderFeed> {
      const subscription = await notifier.subscribe(lockKeys(namespace, name).channel)
      return {
        next: async (timeoutMs) => void (await subscription.next(timeoutMs)),
        close: () => subscription.release(),
      }
    },
    async read(name): Promise<LeaderReading> {
      const { lock } = lockKeys(namespace, name)
      const replies = await bounded('election read', () => client.multi().get(lock).pttl(lock).exec())
      const [[getError, value], [pttlError, pttl]] = replies as [[Error | null, string | null], [Error | null, number]]
      if (getError || pttlError) throw getError ?? pttlError
      const leader = value === null ? undefined : leaderOf(value)
      return { leader, recheckInMs: leader && pttl > 0 ? pttl : Infinity }
    },
    close: () => candidates.close(),
  }
}

/** `<owner>|<id>:<term>` → the leader; `undefined` for a value no candidate wrote (it expires like any lock). */
function leaderOf(value: string): Leader | undefined {
  const bar = value.indexOf('|')
  const colon = value.lastIndexOf(':')
  const term = value.slice(colon + 1)
  if (bar < 0 || colon < bar || !/^\d{1,20}$/.test(term)) return undefined
  return { id: value.slice(bar + 1, colon), term: BigInt(term) }
}
