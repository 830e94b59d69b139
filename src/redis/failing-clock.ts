import type { Cluster, Redis } from 'ioredis'

/** Most scopes remembered at once: a Cluster's masters, or slots the client has no node for yet. */
const MAX_SCOPES = 1_024
const SLOTS = 16_384

/** CRC16/XMODEM, as Redis Cluster hashes keys to slots. */
const CRC16_TABLE = Uint16Array.from({ length: 256 }, (_, byte) => {
  let crc = byte << 8
  for (let bit = 0; bit < 8; bit++) crc = crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1
  return crc & 0xffff
})

/** @internal The slot of `key`: of its hash tag (`{...}`, non-empty) if it has one. */
export function keySlot(key: string): number {
  const open = key.indexOf('{')
  const close = open < 0 ? -1 : key.indexOf('}', open + 1)
  const hashed = Buffer.from(close > open + 1 ? key.slice(open + 1, close) : key)
  let crc = 0
  for (const byte of hashed) crc = ((crc << 8) & 0xffff) ^ CRC16_TABLE[((crc >> 8) ^ byte) & 0xff]!
  return crc % SLOTS
}

/** Cluster, or a client that finds its primary through Sentinel. */
/** @internal */
export function canFailOver(client: Redis | Cluster): boolean {
  return client.isCluster === true || ((client.options as { sentinels?: unknown[] }).sentinels?.length ?? 0) > 0
}

/**
 * Since when Redis has been failing with no success since: what ends a retry through a
 * failover (`RedisStore.throughFailover`). On a Cluster it is kept per master, the node the
 * client sends the key's slot to: one shard's failover is no outage of the others. With one
 * clock for the whole cluster, a process whose only traffic went to the failed shard (its
 * callers all waiting on one hot key) judged the healthy shards by it, and with the breaker
 * open loaded every key of theirs without Redis.
 */
/** @internal */
export class FailingClock {
  private readonly since = new Map<string, number>()

  /** @internal `keyPrefix`: ioredis prefixes keys before it hashes them. */
  constructor(
    private readonly cluster: Cluster | undefined,
    private readonly keyPrefix: string,
  ) {}

  failed(key: string | undefined, now: number): void {
    const scope = this.scope(key)
    if (this.since.has(scope)) return
    if (this.since.size >= MAX_SCOPES) this.since.clear() // forgetting only makes a retry more patient
    this.since.set(scope, now)
  }

  succeeded(key: string | undefined): void {
    if (this.since.size > 0) this.since.delete(this.scope(key)) // nothing to hash while all is well
  }

  /** `performance.now()` of the first failure since the last success, for `key`'s node; undefined if it is not failing. */
  failingSince(key: string | undefined): number | undefined {
    return this.since.size === 0 ? undefined : this.since.get(this.scope(key))
  }

  /** Standalone and Sentinel: one scope. Cluster: the master the client maps the key's slot to (the slot while it knows none). */
  private scope(key: string | undefined): string {
    if (!this.cluster || key === undefined) return ''
    const slot = keySlot(this.keyPrefix + key)
    return this.cluster.slots[slot]?.[0] ?? `slot ${slot}`
  }
}
