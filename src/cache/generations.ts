import type { Cluster, Redis } from 'ioredis'
import { LRUCache } from 'lru-cache'
import { CacheClosedError, InvalidArgumentError } from '../errors.js'
import { checkKey } from '../key.js'
import type { CacheCore } from './core.js'
import { GenerationStore, generationChannel } from './redis/generations.js'

/** Longest namespace name, in UTF-16 code units. */
export const MAX_NAMESPACE_LENGTH = 256
/** Most namespaces whose generation a cache remembers; one forgotten is read again (one GET) on its next use. */
export const MAX_REMEMBERED_NAMESPACES = 10_000

/** What every namespaced key begins with. No plain key a caller uses should begin with it (docs/namespaces.md). */
const MARK = '\u0000ns\u0000'
/** The cache-wide generation's name: no namespace has an empty name. */
const EVERY = ''

/** A namespace name: a non-empty, well-formed string without `\0`, at most MAX_NAMESPACE_LENGTH long. */
export function checkNamespaceName(name: unknown): asserts name is string {
  try {
    checkKey(name, MAX_NAMESPACE_LENGTH)
  } catch (error) {
    throw new InvalidArgumentError('name', (error as Error).message.replace(/^key: /, 'a namespace name '))
  }
  if (name.includes('\u0000')) throw new InvalidArgumentError('name', 'a namespace name cannot contain "\\0"')
}

/** One generation as this process knows it. */
interface Generation {
  value: number
  /** Read or told at least once: a first read that finds a higher one is no clear seen here. */
  known: boolean
  /** Known to be current: read (or told over pub/sub) since the subscription was last confirmed. */
  confirmed: boolean
  reading: Promise<void> | undefined
  /** The prefix last built, and the cache-wide generation it was built with (the hit path reuses it). */
  prefix?: { every: number; own: number; text: string }
}

/**
 * The generations of a cache's namespaces, in memory: each key of a namespace is stored as
 * `\0ns\0<name>\0<every>.<own>\0<key>`, `every` being the cache-wide generation (raised by the
 * cache's own `clear()`) and `own` the namespace's; a `clearable` cache's own keys as
 * `\0ns\0\0<every>\0<key>`. A process learns a bump from the message
 * the bump publishes (no round trip on a hit); a generation it has not confirmed since its
 * subscriber connection was last (re)confirmed is read first (one GET, shared by the calls
 * that need it). Shared by every view of one cache, and by nothing else.
 */
export class Generations {
  readonly #core: CacheCore
  readonly #store: GenerationStore | undefined
  readonly #every: Generation = { value: 0, known: false, confirmed: false, reading: undefined }
  readonly #named = new LRUCache<string, Generation>({ max: MAX_REMEMBERED_NAMESPACES })
  /** Bumped whenever a bump may have been missed: a read begun before it confirms nothing. */
  #losses = 0
  /** The subscriber connection is down: a bump now would go unheard, so a read confirms nothing (each call reads). */
  #subscriberDown = false

  /** @internal */
  constructor(core: CacheCore, client: Redis | Cluster | undefined) {
    this.#core = core
    if (!core.store || !client) {
      this.#every.confirmed = this.#every.known = true // in-process: this process's generations are the only ones
      return
    }
    this.#store = new GenerationStore(client, core.store, core.settings.namespace)
    const notifier = core.notifier!
    // The messages come on the subscriber connection the cache already has (no connection of our own).
    // Once it confirms this subscription it reports 'restored', which unconfirms what was read before.
    notifier.onLoss((phase) => {
      this.#subscriberDown = phase === 'lost'
      this.#unconfirmAll()
    })
    notifier.listen(generationChannel(core.settings.namespace), (message) => this.#told(message))
  }

  /**
   * The prefix of `name`'s keys now; a promise when a generation must be read first. `''`
   * names the cache's own keys (a `clearable` cache): `\0ns\0\0<every>\0`, apart from every
   * namespace (whose names are never empty) and emptied by the cache-wide clear alone.
   */
  prefix(name: string): string | Promise<string> {
    if (name === EVERY) return this.#ownPrefix()
    const own = this.#generation(name)
    // Closed: the call is refused by the cache; nothing is read for it.
    if ((own.confirmed && this.#every.confirmed) || this.#core.closed) return this.#prefixOf(name, own)
    return Promise.all([this.#confirm(EVERY, this.#every), this.#confirm(name, own)]).then(() =>
      this.#prefixOf(name, this.#generation(name)),
    )
  }

  /**
   * Raises the generation of `name` (undefined: every namespace) in Redis, which tells every
   * process, and here. Rejects with `RedisUnavailableError` when Redis could not be told.
   */
  async clear(name: string | undefined): Promise<void> {
    if (this.#core.closed) throw new CacheClosedError()
    const key = name ?? EVERY
    const generation = key === EVERY ? this.#every : this.#generation(key)
    const raised = this.#store ? await this.#store.bump(key, this.#core.id) : generation.value + 1
    this.#raise(key, generation, raised, 'process')
  }

  #ownPrefix(): string | Promise<string> {
    const every = this.#every
    if (every.confirmed || this.#core.closed) return this.#ownPrefixOf(every)
    return this.#confirm(EVERY, every).then(() => this.#ownPrefixOf(every))
  }

  #ownPrefixOf(every: Generation): string {
    const built = every.prefix
    if (built && built.every === every.value) return built.text
    const text = `${MARK}\u0000${every.value.toString(36)}\u0000`
    every.prefix = { every: every.value, own: 0, text }
    return text
  }

  #prefixOf(name: string, own: Generation): string {
    const every = this.#every.value
    const built = own.prefix
    if (built && built.every === every && built.own === own.value) return built.text
    const text = `${MARK}${name}\u0000${every.toString(36)}.${own.value.toString(36)}\u0000`
    own.prefix = { every, own: own.value, text }
    return text
  }

  #generation(name: string): Generation {
    let generation = this.#named.get(name)
    if (!generation) {
      generation = { value: 0, known: !this.#store, confirmed: !this.#store, reading: undefined }
      this.#named.set(name, generation)
    }
    return generation
  }

  /** Reads `name`'s generation (once for the calls that ask meanwhile). Redis unreachable: the last one known stands. */
  #confirm(name: string, generation: Generation): Promise<void> {
    if (generation.confirmed || !this.#store) return Promise.resolve()
    if (generation.reading) return generation.reading
    const losses = this.#losses
    generation.reading = this.#store
      .read(name)
      .then(
        (value) => {
          this.#raise(name, generation, value, 'remote')
          if (this.#losses === losses && !this.#subscriberDown) generation.confirmed = true
        },
        () => {
          // Redis is unavailable: nothing newer can be read, and nothing of the namespace can be
          // read from Redis either; L1 holds only what this process loaded under the last one known.
        },
      )
      .finally(() => (generation.reading = undefined))
    return generation.reading
  }

  /** A bump another process published: `<cache id>|<name>|<generation>`. */
  #told(message: string): void {
    const first = message.indexOf('|')
    const last = message.lastIndexOf('|')
    if (first === last) return
    const name = message.slice(first + 1, last)
    const value = Number(message.slice(last + 1))
    if (!Number.isSafeInteger(value)) return
    const generation = name === EVERY ? this.#every : this.#named.get(name)
    // A namespace this process does not remember has nothing of its generation in L1 to drop
    // only if none of its keys are there: drop them anyway, and read it again on its next use.
    if (!generation) return this.#dropFromMemory(name)
    this.#raise(name, generation, value, 'remote')
  }

  #raise(name: string, generation: Generation, value: number, from: 'process' | 'remote'): void {
    const known = generation.known
    generation.known = true
    if (value <= generation.value) return
    generation.value = value
    this.#dropFromMemory(name)
    if (known) this.#core.events.emit('namespace-cleared', { namespace: name === EVERY ? undefined : name, from })
  }

  /** Drops this process's L1 copies (and tag marks, refresh holds) of `name` (EVERY: of every namespace, and the cache's own keys if it is clearable). */
  #dropFromMemory(name: string): void {
    const memory = this.#core.memory
    if (!memory) return
    const start = name === EVERY ? MARK : `${MARK}${name}\u0000`
    const doomed: string[] = []
    for (const key of memory.keys()) if (key.startsWith(start)) doomed.push(key)
    for (const key of doomed) this.#core.forget(key)
  }

  #unconfirmAll(): void {
    this.#losses++
    if (!this.#store) return
    this.#every.confirmed = false
    for (const generation of this.#named.values()) generation.confirmed = false
  }
}
