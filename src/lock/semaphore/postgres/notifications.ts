import type { PgPoolClientLike, PostgresSettings } from '../../postgres/options.js'
import type { Wakeup } from '../../waiting.js'

/**
 * LISTEN for the semaphores of one PostgreSQL backend, on one connection borrowed from the
 * pool for as long as anyone waits (returned when the last wait ends, UNLISTENed and without
 * our listeners, so the pool's other users get a plain connection). A release NOTIFYs
 * `<namespace>\x01<name>`; each process then wakes its *oldest* waiter for that semaphore
 * alone (the only one of its waiters that can be at the head of the line, since the line is
 * FIFO), so a release costs one attempt per waiting process, not one per waiter. A waiter
 * also wakes on its own every lease/3 (its heartbeat), so a lost notification, or a lost
 * listening connection, costs at most that.
 */
export class SemaphoreNotifications {
  private client: Promise<PgPoolClientLike> | undefined
  private readonly waiters = new Map<string, Set<Waiter>>()
  /** Per listening connection: takes our listeners off it. */
  private readonly detach = new Map<PgPoolClientLike, () => void>()
  private count = 0

  constructor(
    private readonly settings: PostgresSettings,
    private readonly channel: string,
  ) {}

  async subscribe(semaphore: string): Promise<Wakeup> {
    await this.listening()
    const waiter = new Waiter(() => this.remove(semaphore, waiter))
    let set = this.waiters.get(semaphore)
    if (!set) this.waiters.set(semaphore, (set = new Set()))
    set.add(waiter)
    this.count++
    return waiter
  }

  private listening(): Promise<PgPoolClientLike> {
    this.client ??= (async () => {
      const client = await this.settings.pool.connect()
      const events = client as unknown as NodeJS.EventEmitter
      const onNotification = (message: { channel: string; payload?: string }) => {
        if (message.channel === this.channel && message.payload) this.wakeOldest(message.payload)
      }
      const lost = () => {
        // Its waiters go on by their heartbeat; the next wait listens again on a new connection.
        if (this.client === listened) this.client = undefined
        detach()
        this.detach.delete(client)
        client.release(new Error('listener lost'))
      }
      // The connection goes back to the pool when the last wait ends: nothing of ours stays on it.
      const detach = () => {
        events.removeListener('notification', onNotification)
        client.removeListener('error', lost)
      }
      this.detach.set(client, detach)
      events.on('notification', onNotification)
      client.on('error', lost)
      await client.query(`LISTEN "${this.channel}"`)
      return client
    })()
    const listened = this.client
    listened.catch(() => {
      if (this.client === listened) this.client = undefined
    })
    return listened
  }

  /** Gives the listening connection back to the pool without its listeners and its LISTEN (else destroys it). */
  private giveBack(client: PgPoolClientLike): void {
    this.detach.get(client)?.()
    this.detach.delete(client)
    client.query(`UNLISTEN "${this.channel}"`).then(
      () => client.release(),
      (error: unknown) => client.release(error instanceof Error ? error : new Error(String(error))),
    )
  }

  private wakeOldest(semaphore: string): void {
    const first = this.waiters.get(semaphore)?.values().next().value
    first?.wake()
  }

  private remove(semaphore: string, waiter: Waiter): void {
    const set = this.waiters.get(semaphore)
    if (!set?.delete(waiter)) return
    if (set.size === 0) this.waiters.delete(semaphore)
    if (--this.count > 0 || !this.client) return
    const closing = this.client
    this.client = undefined
    closing.then(
      (client) => this.giveBack(client),
      () => {},
    )
  }

  close(): void {
    for (const set of this.waiters.values()) for (const waiter of set) waiter.release()
  }
}

class Waiter implements Wakeup {
  private woken = false
  private resolve: (() => void) | undefined
  private released = false

  constructor(private readonly onRelease: () => void) {}

  wake(): void {
    this.woken = true
    this.resolve?.()
  }

  async next(timeoutMs: number): Promise<unknown> {
    if (!this.woken && !this.released) {
      await new Promise<void>((resolve) => {
        const timer = timeoutMs === Infinity ? undefined : setTimeout(resolve, timeoutMs)
        this.resolve = () => {
          clearTimeout(timer)
          resolve()
        }
      })
      this.resolve = undefined
    }
    const woken = this.woken
    this.woken = false
    return woken || undefined
  }

  release(): void {
    if (this.released) return
    this.released = true
    this.resolve?.()
    this.onRelease()
  }
}
