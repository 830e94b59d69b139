import type { Cluster, Redis } from 'ioredis'
import type { CacheEmitter } from '../events.js'
import { InvalidArgumentError, RedisUnavailableError } from '../errors.js'
import { delay, withTimeout } from '../timers.js'

/** How long to wait between two attempts to read the server's version while it is unreachable. */
const RETRY_MS = 1_000
/** Eviction policies that never evict keys that have no TTL (ours all have one). */
const SAFE_POLICIES = new Set(['noeviction'])

/** `shardedPubSub`, validated: a boolean or 'auto' (the default); `true` needs a Cluster client. `argument` names it in errors. */
export function parseShardedPubSub(
  argument: string,
  value: unknown,
  client: { readonly isCluster: boolean } | undefined,
): boolean | 'auto' {
  const sharded = value ?? 'auto'
  if (typeof sharded !== 'boolean' && sharded !== 'auto')
    throw new InvalidArgumentError(argument, `must be a boolean or 'auto', got ${JSON.stringify(sharded)}`)
  if (sharded === true && client?.isCluster !== true)
    throw new InvalidArgumentError(argument, 'needs redis to be an ioredis Cluster')
  return sharded
}

/** `redis_version:7.0.15` in INFO server → 7. */
export function majorVersion(info: string): number | undefined {
  const match = /^redis_version:(\d+)\./m.exec(info)
  return match ? Number(match[1]) : undefined
}

/**
 * What the cache reads once from the server, in the background, so createCache neither
 * blocks nor fails when Redis is down:
 * - with `shardedPubSub: 'auto'` on a Cluster, the server version: sharded pub/sub on
 *   Redis ≥ 7, classic below (a standalone client is always classic, nothing to read);
 * - `maxmemory-policy` (CONFIG GET, where the server allows it): anything but
 *   `noeviction` can evict locks, fences and tombstones, reported as a `config-warning`.
 * Until the version is known, whoever needs the pub/sub mode waits for it (bounded by
 * their own timeout); an unreachable server is retried every second until it answers.
 */
export class ServerProbe {
  private sharded: boolean | undefined
  private readonly known: Promise<boolean>
  private closed = false

  /** @internal */
  constructor(
    private readonly client: Redis | Cluster,
    setting: boolean | 'auto',
    private readonly timeoutMs: number,
    /** Where the eviction warning goes; a lock backend that fixes its pub/sub mode passes none, and nothing is read. */
    private readonly events?: CacheEmitter,
  ) {
    const fixed = setting === 'auto' ? (client.isCluster ? undefined : false) : setting
    this.sharded = fixed // known at once: commands are then sent in call order, with no await in between
    this.known = fixed === undefined ? this.readVersion() : Promise.resolve(fixed)
    this.known.then(
      (sharded) => (this.sharded = sharded),
      () => {},
    )
    if (events)
      void this.known.then(
        () => this.checkEviction(),
        () => {},
      )
  }

  /** Resolves once the pub/sub mode is known, however long that takes (rejects only after close()). */
  get settled(): Promise<boolean> {
    return this.known
  }

  /** Whether per-key channels are sharded: at once once known, else after the probe (bounded by timeoutMs). */
  shardedPubSub(): boolean | Promise<boolean> {
    if (this.sharded !== undefined) return this.sharded
    return withTimeout(
      this.known,
      this.timeoutMs,
      () => new RedisUnavailableError(`redis version unknown after ${this.timeoutMs} ms (server unreachable?)`),
    )
  }

  close(): void {
    this.closed = true
  }

  private async readVersion(): Promise<boolean> {
    // One INFO at a time: a client that queues commands while disconnected keeps the first.
    let pending: Promise<string> | undefined
    const ask = (): Promise<string> => {
      const asked = this.client.info('server')
      asked.catch(() => {
        if (pending === asked) pending = undefined
      })
      return asked
    }
    while (!this.closed) {
      try {
        pending ??= ask()
        const info = await withTimeout(
          pending,
          this.timeoutMs,
          () => new RedisUnavailableError('INFO server timed out'),
        )
        return (majorVersion(info) ?? 0) >= 7
      } catch {
        await delay(RETRY_MS).promise
      }
    }
    throw new RedisUnavailableError('cache closed')
  }

  private async checkEviction(): Promise<void> {
    try {
      const reply = (await withTimeout(
        this.client.config('GET', 'maxmemory-policy') as Promise<unknown>,
        this.timeoutMs,
        () => new RedisUnavailableError('CONFIG GET timed out'),
      )) as string[]
      const policy = reply?.[1]
      if (this.closed || typeof policy !== 'string' || SAFE_POLICIES.has(policy)) return
      this.events?.emit('config-warning', {
        setting: 'maxmemory-policy',
        value: policy,
        message:
          `maxmemory-policy is ${policy}: under memory pressure Redis may evict a lock (a duplicate load), ` +
          'a fence or a delete tombstone (a late commit can then land after a delete()). Use noeviction, or keep the cache in a Redis of its own.',
      })
    } catch {
      // CONFIG is often disabled or renamed on managed Redis: nothing to say, then.
    }
  }
}
