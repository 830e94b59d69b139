import type { Client, Event, Stat } from 'node-zookeeper-client'
import { boundedCall } from '../connection-hold.js'

/**
 * node-zookeeper-client's constants, hardcoded so that this module never loads the
 * package (an optional peer: the user passes their own client). They are wire-protocol
 * values of ZooKeeper itself and do not change.
 */
export const EPHEMERAL_SEQUENTIAL = 3
export const PERSISTENT = 0
export const ZK_OK = 0
export const NO_NODE = -101
export const NODE_EXISTS = -110
export const NOT_EMPTY = -111
export const CONNECTION_LOSS = -4
export const SESSION_EXPIRED = -112

/** The ZooKeeper error code of `err` (an `Exception`), if it is one. */
export function zkCode(err: unknown): number | undefined {
  const code = (err as { getCode?: () => number } | null)?.getCode?.()
  return typeof code === 'number' ? code : undefined
}

type Callback<T> = (error: Error | null, result: T) => void

/** Promise forms of the client calls the lock uses, each bounded and failing with `LockBackendError('zookeeper', …)`. */
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
    return boundedCall('zookeeper', what, this.raw(run), this.timeoutMs)
  }

  /** Like `call`, but resolves `fallback` when the call fails with one of `codes`. */
  tolerate<T, F>(what: string, codes: number[], fallback: F, run: (callback: Callback<T>) => void): Promise<T | F> {
    const tolerant = this.raw(run).catch((err: unknown) => (codes.includes(zkCode(err) ?? ZK_OK) ? fallback : Promise.reject(err)))
    return boundedCall('zookeeper', what, tolerant, this.timeoutMs)
  }

  create(path: string, mode: number): Promise<string> {
    return this.call<string>('create a lock node', (cb) => this.client.create(path, Buffer.alloc(0), mode, cb as never))
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
    return this.tolerate('remove a lock node', [NO_NODE, NOT_EMPTY], undefined, (cb) => this.client.remove(path, -1, cb as never))
  }

  mkdirp(path: string): Promise<unknown> {
    return this.call('create the lock path', (cb) => this.client.mkdirp(path, cb as never))
  }
}
