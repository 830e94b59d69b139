import { randomUUID } from 'node:crypto'
import { LockLostError } from '../../../errors.js'
import { boundedBackendCall } from '../../backend-calls.js'
import type { PostgresSettings } from '../../postgres/options.js'
import { acquireWaiting } from '../../waiting.js'
import { tokensFrom, type HeldPermits, type SemaphoreRequest, type SemaphoreStore } from '../contract.js'
import { SemaphoreNotifications } from './notifications.js'
import { semaphoreTables, type SemaphoreTables } from './schema.js'

/**
 * Counting semaphores on PostgreSQL: rows with a lease on the server clock, not advisory
 * locks, because a permit must outlive no connection (the pool's clients come and go) yet
 * come back when its holder dies: one row per holder in `semaphore_permits`, renewed by the
 * front's watchdog, a FIFO line in `semaphore_line` with heartbeats, tokens from
 * `semaphore_fences`, every attempt one call of `semaphore_acquire()` under a transaction
 * advisory lock on the semaphore (schema.ts). Waiters sleep until a NOTIFY (notifications.ts)
 * or their heartbeat (lease/3). Through the caller's pool: one client per statement, plus
 * one listening client while anyone waits.
 */
export class PostgresSemaphores implements SemaphoreStore {
  private readonly tables: SemaphoreTables
  private readonly notifications: SemaphoreNotifications

  constructor(private readonly settings: PostgresSettings) {
    this.tables = semaphoreTables(settings)
    this.notifications = new SemaphoreNotifications(settings, this.tables.channel)
  }

  async acquire(request: SemaphoreRequest): Promise<HeldPermits | undefined> {
    await this.tables.ensure()
    const owner = randomUUID()
    const beatMs = request.waitMs === 0 ? 0 : request.leaseMs
    const { namespace } = this.settings
    let held: HeldPermits | undefined
    try {
      held = await acquireWaiting(
        request,
        async () => {
          const sentAt = performance.now()
          const first = await this.call<{ first: string | null }>(
            'semaphore acquire',
            `SELECT ${this.tables.acquire}($1, $2, $3, $4, $5, $6, $7, $8) AS first`,
            [
              namespace,
              request.name,
              owner,
              request.count,
              request.permits,
              request.leaseMs,
              beatMs,
              this.tables.channel,
            ],
            // Still running when given up (queued behind the semaphore's lock, or slow): the
            // release below runs on another connection and may come first, so give back
            // again once the attempt is over, or it leaves a permit nobody holds for a lease.
            () => void this.release(request, owner).catch(() => {}),
          ).catch((error: unknown) => {
            // No answer (a timeout, or the connection reset after the server committed): the
            // permits may be taken; give back whatever this owner took, not a lease later.
            this.release(request, owner).catch(() => {})
            throw error
          })
          if (first !== null) return { held: this.held(request, owner, BigInt(first), sentAt) }
          return { busyForMs: request.leaseMs / 3 } // the next attempt is also the heartbeat
        },
        () => this.notifications.subscribe(`${namespace}\u0001${request.name}`),
      )
      return held
    } finally {
      if (!held && beatMs > 0) this.release(request, owner).catch(() => {})
    }
  }

  close(): void {
    this.notifications.close()
  }

  /** One statement, bounded by `timeout`; `afterTimedOut` runs once a statement that timed out is over. */
  private async call<T extends Record<string, unknown>>(
    what: string,
    sql: string,
    values: unknown[],
    afterTimedOut?: () => void,
  ): Promise<T[keyof T]> {
    const query = this.settings.pool.query(sql, values)
    const result = await boundedBackendCall(
      'postgres',
      what,
      query,
      this.settings.timeoutMs,
      afterTimedOut && (() => void query.then(afterTimedOut, afterTimedOut)),
    )
    return Object.values(result.rows[0] ?? {})[0] as T[keyof T]
  }

  /** Deletes the owner's permits and its place in line; resolves how many permits were still live. */
  private async release(request: SemaphoreRequest, owner: string): Promise<number> {
    const { permits, line, channel } = this.tables
    const released = await this.call<{ released: string }>(
      'semaphore release',
      `WITH left_line AS (DELETE FROM ${line} WHERE namespace = $1 AND name = $2 AND owner = $3),
            gone AS (DELETE FROM ${permits} WHERE namespace = $1 AND name = $2 AND owner = $3
                     RETURNING count, expires_at > clock_timestamp() AS live)
       SELECT coalesce(sum(count) FILTER (WHERE live), 0) AS released, pg_notify($4, $1 || chr(1) || $2) FROM gone`,
      [this.settings.namespace, request.name, owner, channel],
    )
    return Number(released)
  }

  private held(request: SemaphoreRequest, owner: string, first: bigint, acquiredAt: number): HeldPermits {
    let released: Promise<void> | undefined
    return {
      token: first,
      tokens: tokensFrom(first, request.count),
      liveness: 'lease',
      acquiredAt,
      signal: new AbortController().signal, // loss is the watchdog's to detect
      resource: undefined,
      renew: async (leaseMs) =>
        (await this.call<{ renewed: number | null }>(
          'semaphore renew',
          `UPDATE ${this.tables.permits} SET expires_at = clock_timestamp() + $4 * interval '1 millisecond'
            WHERE namespace = $1 AND name = $2 AND owner = $3 AND expires_at > clock_timestamp() RETURNING 1 AS renewed`,
          [this.settings.namespace, request.name, owner, leaseMs],
        )) === 1,
      release: () =>
        (released ??= this.release(request, owner).then((given) => {
          if (given < request.count)
            throw new LockLostError(request.name, `its ${request.count} permits had expired before the release`)
        })),
    }
  }
}
