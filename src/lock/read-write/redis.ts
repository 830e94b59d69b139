import { randomBytes } from 'node:crypto'
import type { Cluster, Redis } from 'ioredis'
import { hashTag } from '../../redis/keys.js'
import type { Notifier } from '../../redis/notifier.js'
import { registerScripts } from '../../redis/scripts.js'
import type { ServerProbe } from '../../redis/server-probe.js'
import type { AcquireRequest, HeldLock, LockBackend } from '../backend.js'
import { boundedRedisCall } from '../redis/bounded-call.js'
import { leasedHold } from '../redis/leased-hold.js'
import type { StoreSettings } from '../backend.js'
import { acquireWaiting } from '../waiting.js'
import type { ReadWriteStore } from './store.js'

const SCRIPTS = {
  stampedeGuardRwRead: { file: 'read.lua', keys: 4 },
  stampedeGuardRwWrite: { file: 'write.lua', keys: 4 },
  stampedeGuardRwRenew: { file: 'renew.lua', keys: 2 },
  stampedeGuardRwRelease: { file: 'release.lua', keys: 4 },
} as const

/** How long a token counter outlives its last acquisition (memory bound; tokens do not depend on it). */
const COUNTER_KEEP_MS = 60_000

interface RwKeys {
  readers: string
  writer: string
  wanted: string
  counter: string
  channel: string
}

/** @internal `<ns>:{rw:<name>}` and its parts: one hash tag, so one slot on a Cluster; a space apart from locks' `{l:}`. */
export function readWriteKeys(namespace: string, name: string): RwKeys {
  const base = `${namespace}:${hashTag('rw', 'rwh', name)}`
  return {
    readers: `${base}:readers`,
    writer: `${base}:writer`,
    wanted: `${base}:wanted`,
    counter: base,
    channel: `${base}:ch`,
  }
}

/**
 * Read-write locks on Redis (read.lua, write.lua, renew.lua, release.lua): readers are
 * members of a sorted set scored by the end of each one's own lease (server ms), the writer
 * is a string `<owner>:<token>` with PX, like the mutex. Writers first: a writer that finds
 * readers in adds itself to a `wanted` set, and no new reader gets in while a waiting
 * writer's claim stands; the claim lasts `lease` and is renewed by the writer's next
 * attempt (at least every lease/2). Every release publishes on the lock's channel; waiters
 * subscribe before re-checking and sleep until a message or what the script said the
 * holders can last.
 * @internal
 */
export function redisReadWrite(
  client: Redis | Cluster,
  settings: StoreSettings,
  notifier: Notifier,
  probe: ServerProbe,
): ReadWriteStore {
  const scripts = registerScripts(client, SCRIPTS, new URL('./', import.meta.url))
  const call = <T>(operation: string, command: () => Promise<T>) =>
    boundedRedisCall(client, settings.commandTimeoutMs, operation, command)
  const publish = async () => ((await probe.shardedPubSub()) ? 'SPUBLISH' : 'PUBLISH')
  const release = async (keys: RwKeys, kind: 'r' | 'w' | 'g', owner: string) => {
    const mode = await publish()
    await call('read-write release', () =>
      scripts.stampedeGuardRwRelease(keys.readers, keys.writer, keys.wanted, keys.channel, kind, owner, mode),
    )
  }

  const backend = (kind: 'r' | 'w'): LockBackend<unknown> => ({
    name: 'redis',
    async acquire(request: AcquireRequest): Promise<HeldLock<unknown> | undefined> {
      const keys = readWriteKeys(settings.namespace, request.key)
      const owner = randomBytes(16).toString('hex')
      const keep = Math.max(COUNTER_KEEP_MS, 2 * request.leaseMs)
      let sentAt = 0
      let answered = true
      const held = await acquireWaiting(
        request,
        async () => {
          sentAt = performance.now()
          answered = false
          // write.lua takes one more argument: how long a waiting writer's claim stands (a lease).
          const args = [keys.readers, keys.writer, keys.wanted, keys.counter, owner, request.leaseMs, keep] as const
          const [won, arg] = (await call(kind === 'r' ? 'read lock acquire' : 'write lock acquire', () =>
            kind === 'r'
              ? scripts.stampedeGuardRwRead(...args)
              : scripts.stampedeGuardRwWrite(...args, request.leaseMs),
          )) as [number, string | number]
          answered = true
          return won === 1 ? { held: String(arg) } : { busyForMs: Number(arg) }
        },
        () => notifier.subscribe(keys.channel),
      ).catch((error: unknown) => {
        // Unanswered: the attempt may still land; undo it (and a writer's claim) behind it.
        if (!answered) void release(keys, kind, owner).catch(() => {})
        throw error
      })
      if (held === undefined) {
        // A writer that gives up takes its claim back, so the readers it kept out get in now.
        if (kind === 'w') void release(keys, 'g', owner).catch(() => {})
        return undefined
      }
      return heldLock(keys, kind, owner, held, sentAt)
    },
    async close() {},
  })

  const heldLock = (
    keys: RwKeys,
    kind: 'r' | 'w',
    owner: string,
    token: string,
    acquiredAt: number,
  ): HeldLock<unknown> => {
    const holder = kind === 'r' ? owner : `${owner}:${token}`
    return leasedHold(
      token,
      acquiredAt,
      async (leaseMs) =>
        Number(
          await call('read-write renew', () =>
            scripts.stampedeGuardRwRenew(keys.readers, keys.writer, kind, holder, leaseMs),
          ),
        ) === 1,
      () => release(keys, kind, owner),
    )
  }

  return { readers: backend('r'), writers: backend('w'), close: async () => {} }
}
