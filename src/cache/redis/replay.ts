import type { Cluster, Redis } from 'ioredis'
import { keyPrefixOf } from '../../redis/keys.js'
import { registerScripts, type ClientWith } from '../../redis/scripts.js'
import type { EntryKeys } from './keys.js'
import type { Broadcast, RedisStore } from './store.js'

const REPLAY_SCRIPTS = {
  stampedeGuardInvalidateBefore: { file: 'invalidate-before.lua', keys: 2 },
} as const

/** The delete outbox's one script (invalidate-before.lua), sent through the store's budget, timeout and breaker. */
export class ReplayStore {
  private readonly client: ClientWith<keyof typeof REPLAY_SCRIPTS>
  private readonly keyPrefix: string

  /** @internal */
  constructor(
    client: Redis | Cluster,
    private readonly store: RedisStore,
  ) {
    this.client = registerScripts(client, REPLAY_SCRIPTS, new URL('./scripts/', import.meta.url))
    this.keyPrefix = keyPrefixOf(client)
  }

  /**
   * Erases what `keys` hold if it was written before `beforeMicros` (server µs), and publishes
   * `broadcast` either way. True when something older was erased (or the key held nothing),
   * false when a newer value was kept.
   */
  async invalidateBefore(
    keys: EntryKeys,
    beforeMicros: number,
    retentionMs: number,
    broadcast: Broadcast,
  ): Promise<{ erased: boolean; corrupt: boolean }> {
    const [erased, corrupt] = (await this.store.run('replay-delete', () =>
      this.client.stampedeGuardInvalidateBefore(
        keys.entry,
        keys.fresh,
        String(Math.floor(beforeMicros)),
        retentionMs,
        this.keyPrefix + broadcast.channel,
        broadcast.message,
      ),
    )) as [number, number]
    return { erased: erased === 1, corrupt: corrupt === 1 }
  }
}
