import { randomBytes } from 'node:crypto'
import type { Cluster, Redis } from 'ioredis'
import { releaseAbandoned } from '../../redis/abandoned.js'
import { entryKeys, type EntryKeys } from '../../redis/keys.js'
import { Notifier } from '../../redis/notifier.js'
import { ServerProbe } from '../../redis/server-probe.js'
import type { AcquireRequest, HeldLock, LockBackend } from '../backend.js'
import type { StoreSettings } from '../resolve-backend.js'
import { acquireWaiting } from '../waiting.js'
import { boundedCall } from './bounded-call.js'
import { defineLockScripts, type LockClient } from './scripts.js'

/** How long a key's token counter outlives its last acquisition (memory bound; fencing does not depend on it). */
const COUNTER_KEEP_MS = 60_000

/**
 * The Redis lock: one key per lock, `owner:token` with PX = lease, a fencing token from a
 * per-key counter issued in the acquire script, compare-and-delete release that publishes
 * on the key's channel, and compare-and-PEXPIRE renewal (the cache's extend.lua).
 *
 * Names: `<ns>:{k:<key>}` is the token counter, `:lock` the lock, `:ch` the channel; one
 * hash tag, so one slot on a Cluster.
 *
 * Waiters subscribe to the channel *before* re-checking, so a release cannot fall in
 * between (Redisson #1763), and sleep until a message, the holder's PTTL, or a backed-off
 * poll, whichever is first.
 */
export class RedisLockBackend implements LockBackend {
  readonly name = 'redis'
  private readonly client: LockClient
  private readonly notifier: Notifier

  constructor(
    client: Redis | Cluster,
    private readonly settings: StoreSettings,
  ) {
    this.client = defineLockScripts(client)
    this.notifier = new Notifier(client, settings.commandTimeoutMs, new ServerProbe(client, false, settings.commandTimeoutMs))
  }

  async acquire(request: AcquireRequest): Promise<HeldLock | undefined> {
    const keys = entryKeys(this.settings.namespace, request.key)
    const owner = randomBytes(16).toString('hex')
    return acquireWaiting(
      request,
      async () => {
        const sentAt = performance.now()
        const [won, arg] = await this.attempt(keys, owner, request.leaseMs)
        return won === 1 ? { held: this.held(keys, owner, String(arg), sentAt) } : { busyForMs: Number(arg) }
      },
      () => this.notifier.subscribe(keys.channel),
    )
  }

  /** One try. If it fails without an answer, the script may still run later (replayed after a reconnect): release that owner behind it, on the same connection. */
  private async attempt(keys: EntryKeys, owner: string, leaseMs: number): Promise<[number, string | number]> {
    try {
      return (await boundedCall(this.client, this.settings.commandTimeoutMs, 'lock acquire', () =>
        this.client.stampedeGuardLockAcquire(keys.lock, keys.entry, owner, leaseMs, Math.max(COUNTER_KEEP_MS, 2 * leaseMs)),
      )) as [number, string | number]
    } catch (error) {
      releaseAbandoned(this.client, keys, owner)
      throw error
    }
  }

  private held(keys: EntryKeys, owner: string, token: string, acquiredAt: number): HeldLock {
    const value = `${owner}:${token}`
    let released: Promise<void> | undefined
    return {
      token: BigInt(token),
      liveness: 'lease',
      acquiredAt,
      signal: new AbortController().signal, // loss is the watchdog's to detect
      resource: undefined,
      renew: async (leaseMs) =>
        (await boundedCall(this.client, this.settings.commandTimeoutMs, 'lock extend', () => this.client.stampedeGuardExtend(keys.lock, value, leaseMs))) === 1,
      release: () =>
        (released ??= boundedCall(this.client, this.settings.commandTimeoutMs, 'lock release', () =>
          this.client.stampedeGuardLockRelease(keys.lock, keys.channel, `${owner}:`, 1),
        ).then(() => {})),
    }
  }

  async close(): Promise<void> {
    this.notifier.close()
  }
}
