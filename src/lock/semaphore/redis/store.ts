import { randomBytes } from 'node:crypto'
import type { Cluster, Redis } from 'ioredis'
import { LockLostError } from '../../../errors.js'
import { hashTag } from '../../../redis/keys.js'
import type { Notifier } from '../../../redis/notifier.js'
import { registerScripts, type ClientWith } from '../../../redis/scripts.js'
import type { ServerProbe } from '../../../redis/server-probe.js'
import { boundedRedisCall } from '../../redis/bounded-call.js'
import { onOwnChannel } from '../../redis/own-channel.js'
import type { SubscribedWaits } from '../../redis/subscribed-waits.js'
import type { StoreSettings } from '../../backend.js'
import { acquireWaiting } from '../../waiting.js'
import { tokensFrom, type HeldPermits, type SemaphoreRequest, type SemaphoreStore } from '../contract.js'

const SCRIPTS = {
  stampedeGuardSemaphoreAcquire: { file: 'acquire.lua', keys: 6 },
  stampedeGuardSemaphoreRelease: { file: 'release.lua', keys: 5 },
  stampedeGuardSemaphoreRenew: { file: 'renew.lua', keys: 1 },
} as const

type SemaphoreClient = ClientWith<keyof typeof SCRIPTS>

/** How long a semaphore's token counter outlives its last acquisition (memory only; tokens do not depend on it). */
const COUNTER_KEEP_MS = 60_000

/** The Redis names of one semaphore; one hash tag, so one slot on a Cluster, a space apart from locks (`{l:}`). */
export interface SemaphoreKeys {
  /** Token counter. */
  counter: string
  /** Zset of live permits: `<owner>:<i>` scored by the server ms at which each expires. */
  holders: string
  /** The FIFO line and its waiters' heartbeats (queue.lua). */
  queue: string
  beats: string
  /** Prefix of each waiter's own channel: `<prefix><owner>`. */
  wake: string
  /** Hash owner → first token, so a replayed attempt answers the same (permits.lua). */
  tokens: string
}

/** @internal */
export function semaphoreKeys(namespace: string, name: string): SemaphoreKeys {
  const base = `${namespace}:${hashTag('s', 'sh', name)}`
  return {
    counter: base,
    holders: `${base}:h`,
    queue: `${base}:q`,
    beats: `${base}:b`,
    wake: `${base}:w:`,
    tokens: `${base}:t`,
  }
}

/** What the Redis lock backend lends its semaphores: its client, subscriber, and budgets. */
/** @internal */
export interface RedisSemaphoreParts {
  readonly client: Redis | Cluster
  readonly notifier: Notifier
  readonly probe: ServerProbe
  readonly subscribed: SubscribedWaits
  readonly settings: StoreSettings
}

/**
 * Counting semaphores on Redis: a sorted set of permits scored by their expiry on the server
 * clock (`TIME` in every script; a client's clock never enters a score), one fencing token
 * per permit from a per-semaphore counter, a FIFO line of waiters in the semaphore's own keys
 * with heartbeats, and a hand-off that wakes the waiter at the head alone, on its own channel.
 *
 * - A waiter beats at every attempt, every lease/3 at least while it waits, and is dropped
 *   from the line a lease after its last beat: a dead waiter holds the line up for at most
 *   one lease, a live one is never dropped (and one that was, after a pause longer than a
 *   lease, rejoins at the end at its next attempt).
 * - A crashed holder's permits expire one lease after its last renewal; the head, asleep
 *   until the earliest expiry, takes them then.
 * - An attempt that got no reply may still run; a release for its owner is queued behind it
 *   on the same connection, so it never leaves an orphan permit.
 */
export class RedisSemaphores implements SemaphoreStore {
  private readonly client: SemaphoreClient

  /** @internal */
  constructor(private readonly parts: RedisSemaphoreParts) {
    this.client = registerScripts(parts.client, SCRIPTS, new URL('./', import.meta.url))
  }

  async acquire(request: SemaphoreRequest): Promise<HeldPermits | undefined> {
    const keys = semaphoreKeys(this.parts.settings.namespace, request.name)
    const owner = randomBytes(16).toString('hex')
    const beatMs = request.waitMs === 0 ? 0 : request.leaseMs
    let held: HeldPermits | undefined
    let joined = false
    try {
      held = await acquireWaiting(
        request,
        async () => {
          const sentAt = performance.now()
          joined ||= beatMs > 0
          const [won, value] = await this.attempt(keys, owner, request, beatMs)
          if (won === 1) return { held: this.held(keys, owner, request, BigInt(value), sentAt) }
          const untilExpiry = Number(value) < 0 ? Infinity : Number(value)
          // The next attempt is also the heartbeat: at least every lease/3.
          return { busyForMs: Math.min(untilExpiry, request.leaseMs / 3) }
        },
        () =>
          this.parts.subscribed.take(async () =>
            onOwnChannel(await this.parts.notifier.subscribe(`${keys.wake}${owner}`)),
          ),
      )
      return held
    } finally {
      // Gave up, failed or aborted while in line: leave it now, not a lease later.
      if (!held && joined) this.release(keys, owner, request).catch(() => {})
    }
  }

  private async attempt(
    keys: SemaphoreKeys,
    owner: string,
    request: SemaphoreRequest,
    beatMs: number,
  ): Promise<[number, string | number]> {
    const keep = Math.max(COUNTER_KEEP_MS, 2 * request.leaseMs)
    const publish = await this.publishCommand()
    try {
      return (await boundedRedisCall(this.parts.client, this.parts.settings.commandTimeoutMs, 'semaphore acquire', () =>
        this.client.stampedeGuardSemaphoreAcquire(
          keys.holders,
          keys.counter,
          keys.queue,
          keys.beats,
          keys.wake,
          keys.tokens,
          owner,
          request.count,
          request.permits,
          request.leaseMs,
          beatMs,
          keep,
          publish,
        ),
      )) as [number, string | number]
    } catch (error) {
      // No reply: the script may still run (from the backlog, or replayed after a reconnect).
      // This release runs after it on the same connection, whenever that is.
      this.sendRelease(keys, owner, request, publish).catch(() => {})
      throw error
    }
  }

  private async release(keys: SemaphoreKeys, owner: string, request: SemaphoreRequest): Promise<number> {
    const publish = await this.publishCommand()
    return Number(
      await boundedRedisCall(this.parts.client, this.parts.settings.commandTimeoutMs, 'semaphore release', () =>
        this.sendRelease(keys, owner, request, publish),
      ),
    )
  }

  private sendRelease(keys: SemaphoreKeys, owner: string, request: SemaphoreRequest, publish: string) {
    return this.client.stampedeGuardSemaphoreRelease(
      keys.holders,
      keys.queue,
      keys.beats,
      keys.wake,
      keys.tokens,
      owner,
      request.count,
      request.permits,
      publish,
    )
  }

  private async publishCommand(): Promise<'PUBLISH' | 'SPUBLISH'> {
    return (await this.parts.probe.shardedPubSub()) ? 'SPUBLISH' : 'PUBLISH'
  }

  private held(
    keys: SemaphoreKeys,
    owner: string,
    request: SemaphoreRequest,
    first: bigint,
    acquiredAt: number,
  ): HeldPermits {
    let released: Promise<void> | undefined
    const tokens = tokensFrom(first, request.count)
    return {
      token: first,
      tokens,
      liveness: 'lease',
      acquiredAt,
      signal: new AbortController().signal, // loss is the watchdog's to detect
      resource: undefined,
      renew: async (leaseMs) =>
        Number(
          await boundedRedisCall(this.parts.client, this.parts.settings.commandTimeoutMs, 'semaphore renew', () =>
            this.client.stampedeGuardSemaphoreRenew(keys.holders, owner, request.count, leaseMs),
          ),
        ) === 1,
      release: () =>
        (released ??= this.release(keys, owner, request).then((given) => {
          if (given < request.count)
            throw new LockLostError(
              request.name,
              `${request.count - given} of its ${request.count} permits had expired before the release`,
            )
        })),
    }
  }
}
