import { randomBytes } from 'node:crypto'
import type { Cluster, Redis } from 'ioredis'
import type { LockKeys } from '../keys.js'
import type { Notifier } from '../../../redis/notifier.js'
import { registerScripts, type ClientWith } from '../../../redis/scripts.js'
import type { ServerProbe } from '../../../redis/server-probe.js'
import type { AcquireRequest, HeldLock } from '../../backend.js'
import type { StoreSettings } from '../../backend.js'
import { acquireWaiting, type Wakeup } from '../../waiting.js'
import { boundedRedisCall } from '../bounded-call.js'
import { leasedHold } from '../leased-hold.js'
import { onOwnChannel } from '../own-channel.js'
import type { SubscribedWaits } from '../subscribed-waits.js'

const SCRIPTS = {
  stampedeGuardFairAcquire: { file: 'acquire.lua', keys: 5 },
  stampedeGuardFairRelease: { file: 'release.lua', keys: 6 },
} as const

type FairClient = ClientWith<keyof typeof SCRIPTS>
type PublishCommand = 'PUBLISH' | 'SPUBLISH'

/** How long a key's token counter outlives its last acquisition (as the unfair lock's). */
const COUNTER_KEEP_MS = 60_000

/** The line of a fair lock, in the lock's own hash tag next to its `:lock` string. */
interface LineKeys {
  queue: string
  beats: string
  wake: string
}

function lineOf(keys: LockKeys): LineKeys {
  return { queue: `${keys.counter}:q`, beats: `${keys.counter}:b`, wake: `${keys.counter}:w:` }
}

/** @internal What the Redis lock backend lends its fair mode. */
export interface FairLockParts {
  readonly client: Redis | Cluster
  readonly notifier: Notifier
  readonly probe: ServerProbe
  readonly subscribed: SubscribedWaits
  readonly settings: StoreSettings
  /** Compare-and-PEXPIRE of the lock string, batched with the unfair locks' renewals. */
  renew(lock: string, value: string, leaseMs: number): Promise<boolean>
}

/**
 * The fair (FIFO) mode of the Redis lock (`fair: true`): the same `:lock` string and token
 * counter as the unfair lock, plus a line of waiters in the lock's own keys (queue.lua).
 * A waiter joins the line at its first attempt and beats at every attempt (at least every
 * lease/3 while it waits); one whose beat ran out (a lease without an attempt: a dead
 * process) is dropped from the line, so it holds the line up for at most one lease, and a
 * live one is never dropped. A release wakes the waiter at the head alone, on its own
 * channel; only the head may take a free lock, so no contender races it.
 */
export class FairRedisLocks {
  private readonly client: FairClient

  /** @internal */
  constructor(private readonly parts: FairLockParts) {
    this.client = registerScripts(parts.client, SCRIPTS, new URL('./', import.meta.url))
  }

  async acquire(keys: LockKeys, request: AcquireRequest): Promise<HeldLock | undefined> {
    const line = lineOf(keys)
    const owner = randomBytes(16).toString('hex')
    const beatMs = request.waitMs === 0 ? 0 : request.leaseMs
    let held: HeldLock | undefined
    // A release handed us the lock (release.lua): its token, and when our last attempt, whose beat its lease is, was sent.
    let granted: string | undefined
    let lastSentAt = 0
    try {
      held = await acquireWaiting(
        request,
        async () => {
          if (granted !== undefined) return { held: this.held(keys, line, owner, granted, lastSentAt) }
          const sentAt = (lastSentAt = performance.now())
          const [won, value] = await this.attempt(keys, line, owner, request.leaseMs, beatMs)
          if (won === 1) return { held: this.held(keys, line, owner, String(value), sentAt) }
          // The next attempt is also the heartbeat: at least every lease/3.
          return { busyForMs: Math.min(Number(value) < 0 ? Infinity : Number(value), request.leaseMs / 3) }
        },
        () =>
          this.parts.subscribed.take(async () =>
            handOffs(
              onOwnChannel(await this.parts.notifier.subscribe(`${line.wake}${owner}`)),
              (token) => (granted = token),
            ),
          ),
      )
      return held
    } finally {
      // Gave up, failed or aborted while in line: leave it now, not a lease later.
      if (!held && beatMs > 0) this.release(keys, line, owner).catch(() => {})
    }
  }

  private async attempt(
    keys: LockKeys,
    line: LineKeys,
    owner: string,
    leaseMs: number,
    beatMs: number,
  ): Promise<[number, string | number]> {
    const known = this.publishCommand()
    const publish = typeof known === 'string' ? known : await known
    const keep = Math.max(COUNTER_KEEP_MS, 2 * leaseMs)
    try {
      return (await boundedRedisCall(this.parts.client, this.parts.settings.commandTimeoutMs, 'lock acquire', () =>
        this.client.stampedeGuardFairAcquire(
          keys.lock,
          keys.counter,
          line.queue,
          line.beats,
          line.wake,
          owner,
          leaseMs,
          keep,
          beatMs,
          publish,
        ),
      )) as [number, string | number]
    } catch (error) {
      // No reply: the script may still run later; this release runs after it on the same connection.
      this.sendRelease(keys, line, owner, publish).catch(() => {})
      throw error
    }
  }

  private async release(keys: LockKeys, line: LineKeys, owner: string): Promise<void> {
    // Known after the first call: no await (and no microtask turn) before the script is sent.
    const known = this.publishCommand()
    const publish = typeof known === 'string' ? known : await known
    await boundedRedisCall(this.parts.client, this.parts.settings.commandTimeoutMs, 'lock release', () =>
      this.sendRelease(keys, line, owner, publish),
    )
  }

  private sendRelease(keys: LockKeys, line: LineKeys, owner: string, publish: string) {
    return this.client.stampedeGuardFairRelease(
      keys.lock,
      line.queue,
      line.beats,
      line.wake,
      keys.channel,
      keys.counter,
      `${owner}:`,
      publish,
      COUNTER_KEEP_MS,
    )
  }

  /** The pub/sub mode's publish command: at once once the probe knows it, else a promise. */
  private publishCommand(): PublishCommand | Promise<PublishCommand> {
    const sharded = this.parts.probe.shardedPubSub()
    const command = (yes: boolean): PublishCommand => (yes ? 'SPUBLISH' : 'PUBLISH')
    return typeof sharded === 'boolean' ? command(sharded) : sharded.then(command)
  }

  private held(keys: LockKeys, line: LineKeys, owner: string, token: string, acquiredAt: number): HeldLock {
    const value = `${owner}:${token}`
    return leasedHold(
      token,
      acquiredAt,
      (leaseMs) => this.parts.renew(keys.lock, value, leaseMs),
      () => this.release(keys, line, owner),
    )
  }
}

/** A waiter's wake-up that also reads a hand-off ("g:<token>") from its messages. */
function handOffs(wakeup: Required<Wakeup>, onGranted: (token: string) => void): Required<Wakeup> {
  return {
    next: async (timeoutMs) => {
      const message = await wakeup.next(timeoutMs)
      const text = message === undefined ? '' : String(message)
      if (text.startsWith('g:')) onGranted(text.slice(2))
      return message
    },
    interrupt: () => wakeup.interrupt(),
    release: () => wakeup.release(),
  }
}
