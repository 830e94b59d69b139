import type { Client, Event, Stat } from 'node-zookeeper-client'
import { boundedBackendCall } from '../backend-calls.js'

/**
 * node-zookeeper-client's constants, hardcoded so that this module never loads the
 * package (an optional peer: the user passes their own client). They are wire-protocol
 * values of ZooKeeper itself and do not change.
 */
export const EPHEMERAL_SEQUENTIAL = 3
export const ZK_OK = 0
export const NO_NODE = -101
export const NOT_EMPTY = -111
export const CONNECTION_LOSS = -4
export const SESSION_EXPIRED = -112

/** The ZooKeeper error code of `err` (an `Exception`), if it is one. */
export function zkCode(err: unknown): number | undefined {
  const code = (err as { getCode?: () => number } | null)?.getCode?.()
  return typeof code === 'number' ? code : undefined
}

type Callback<T> = (error: Error | null, result: T) => void

/** Background attempts at removing a lock node ZooKeeper could not be told about (backed off to 2 s: about a minute). */
const REMOVE_RETRIES = 35

/** Promise forms of the client calls the lock uses, each bounded and failing with `LockBackendError('zookeeper', …)`. */
/** @internal Holds the package's own client types: kept out of the published `.d.ts`. */
export class ZooKeeperCalls {
  constructor(
    readonly client: Client,
    private readonly timeoutMs: number,
  ) {}

  /** Bounds a callback-style call; rejects with the ZooKeeper `Exception` when it failed (see `zkCode`). */
  raw<T>(run: (callback: Callback<T>) => void): Promise<T> {
    return new Promise<T>((resolve, reject) => run((error, result) => (error ? reject(error) : resolve(result))))
  }

  call<T>(what: string, run: (callback: Callback<T>) => void): Promise<T> {
    return boundedBackendCall('zookeeper', what, this.raw(run), this.timeoutMs)
  }

  /** Like `call`, but resolves `fallback` when the call fails with one of `codes`. */
  tolerate<T, F>(what: string, codes: number[], fallback: F, run: (callback: Callback<T>) => void): Promise<T | F> {
    const tolerant = this.raw(run).catch((err: unknown) =>
      codes.includes(zkCode(err) ?? ZK_OK) ? fallback : Promise.reject(err),
    )
    return boundedBackendCall('zookeeper', what, tolerant, this.timeoutMs)
  }

  /**
   * Creates a node. Should the bound give up on a create still queued in the client (it is
   * sent once the client reconnects), a late success is removed again: a lock node nobody
   * waits for would block its queue for the whole session.
   */
  create(path: string, mode: number, data: Buffer = Buffer.alloc(0)): Promise<string> {
    let settled = false
    const raw = this.raw<string>((cb) => this.client.create(path, data, mode, cb as never)).finally(
      () => (settled = true),
    )
    raw.catch(() => {})
    return boundedBackendCall('zookeeper', 'create a lock node', raw, this.timeoutMs).catch((err: unknown) => {
      if (!settled)
        raw.then(
          (created) => this.removeEventually(created),
          () => {},
        )
      throw err
    })
  }

  children(path: string): Promise<string[]> {
    return this.call<string[]>('list the lock queue', (cb) => this.client.getChildren(path, cb as never))
  }

  /** The node's Stat, or undefined when it does not exist. With `watcher`, also watches it (one shot). */
  exists(path: string, watcher?: (event: Event) => void): Promise<Stat | undefined> {
    return this.call<Stat | undefined>('check a lock node', (cb) =>
      watcher ? this.client.exists(path, watcher, cb as never) : this.client.exists(path, cb as never),
    ).then((stat) => stat ?? undefined)
  }

  /** Removes `path`; already gone (or, for a parent, not empty) is fine. */
  remove(path: string): Promise<unknown> {
    return this.tolerate('remove a lock node', [NO_NODE, NOT_EMPTY], undefined, (cb) =>
      this.client.remove(path, -1, cb as never),
    )
  }

  /**
   * Removes a lock node; when ZooKeeper cannot be told now, keeps trying in the
   * background (backed off, about a minute in all), since the node would otherwise stay
   * for as long as the session, blocking everyone queued behind it. Stops once the
   * session has expired (the node went with it). Settles with the first attempt.
   */
  removeEventually(path: string): Promise<unknown> {
    const retry = (attempt: number) => {
      if (attempt > REMOVE_RETRIES) return
      const timer = setTimeout(
        () => {
          this.remove(path).catch((err: unknown) => {
            if (zkCode((err as { cause?: unknown }).cause) !== SESSION_EXPIRED) retry(attempt + 1)
          })
        },
        Math.min(2_000, 100 * 2 ** attempt),
      )
      timer.unref()
    }
    const first = this.remove(path)
    first.catch((err: unknown) => {
      if (zkCode((err as { cause?: unknown }).cause) !== SESSION_EXPIRED) retry(1)
    })
    return first
  }

  mkdirp(path: string): Promise<unknown> {
    return this.call('create the lock path', (cb) => this.client.mkdirp(path, cb as never))
  }
}

/** @internal A node's `czxid` (the zxid of the transaction that created it): the ZooKeeper backends' token. */
export function czxid(stat: Stat): bigint {
  return stat.czxid.readBigUInt64BE(0)
}
