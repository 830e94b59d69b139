import type { Cluster, Redis } from 'ioredis'
import { keyPrefixOf } from '../../redis/keys.js'
import { registerScripts, type ClientWith } from '../../redis/scripts.js'
import type { RedisStore } from './store.js'

/** `<ns>:__generation:<name>`; the cache-wide generation (every namespace's) is `<ns>:__generation:` (names are never empty). */
export function generationKey(namespace: string, name: string): string {
  return `${namespace}:__generation:${name}`
}

/** Channel on which generation bumps are broadcast as `<cache id>|<name>|<generation>`. */
export function generationChannel(namespace: string): string {
  return `${namespace}:__generations`
}

const GENERATION_SCRIPTS = {
  stampedeGuardClear: { file: 'clear.lua', keys: 1 },
} as const

/** A generation as stored: a decimal integer, 0 when there is none or it cannot be read as one. */
export function parseGeneration(stored: string | null): number {
  return stored !== null && /^\d{1,16}$/.test(stored) ? Number(stored) : 0
}

/**
 * The generations' Redis side: one GET to read one, one script to raise it (clear.lua), each
 * sent through the store's command budget, timeout and breaker.
 */
export class GenerationStore {
  private readonly client: ClientWith<keyof typeof GENERATION_SCRIPTS>
  private readonly keyPrefix: string

  /** @internal */
  constructor(
    client: Redis | Cluster,
    private readonly store: RedisStore,
    private readonly namespace: string,
  ) {
    this.client = registerScripts(client, GENERATION_SCRIPTS, new URL('./scripts/', import.meta.url))
    this.keyPrefix = keyPrefixOf(client)
  }

  async read(name: string): Promise<number> {
    const key = generationKey(this.namespace, name)
    return parseGeneration(await this.store.run('generation', () => this.client.get(key)))
  }

  /** Raises the generation of `name` ('' for every namespace) and publishes it; the new one. */
  async bump(name: string, cacheId: string): Promise<number> {
    const key = generationKey(this.namespace, name)
    const channel = this.keyPrefix + generationChannel(this.namespace)
    const reply = await this.store.run('clear', () =>
      this.client.stampedeGuardClear(key, channel, `${cacheId}|${name}|`),
    )
    return parseGeneration(String(reply))
  }
}
