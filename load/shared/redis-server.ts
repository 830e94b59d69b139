/**
 * A private, throwaway redis-server for the harness when REDIS_URL is not set.
 *
 * The test support's server (test/support/redis.ts): a free 127.0.0.1 port, no
 * persistence, tracked and stopped by its pid only, and killed synchronously if the
 * harness exits any other way. `stopFor()` is the `outage` scenario: kill, wait, restart
 * on the same port so the app's clients reconnect to the "same" Redis.
 */
import { setTimeout as sleep } from 'node:timers/promises'
import { redisServerBinary, startRedis } from '../../test/support/redis.js'

export interface PrivateRedis {
  readonly url: string
  readonly port: number
  /** Kill it, wait `ms`, start it again on the same port (empty: no persistence). */
  stopFor(ms: number): Promise<void>
  stop(): Promise<void>
}

/** The redis-server binary, or undefined when it is not installed. */
export function findRedisServer(): string | undefined {
  return redisServerBinary
}

/** Starts a private redis-server (needs one installed: see findRedisServer). */
export async function startPrivateRedis(): Promise<PrivateRedis> {
  const server = await startRedis({ args: ['--loglevel', 'warning'] })
  return {
    url: server.url,
    port: server.port,
    async stopFor(ms) {
      await server.kill()
      await sleep(ms)
      await server.restart() // retried while the port lingers after the kill
    },
    stop: () => server.stop(),
  }
}

/** What a benchmark runs against: REDIS_URL if set, else a private redis-server it must stop. */
export async function benchRedis(bench: string): Promise<{ url: string; privateServer: PrivateRedis | undefined }> {
  if (process.env.REDIS_URL) return { url: process.env.REDIS_URL, privateServer: undefined }
  if (!findRedisServer()) throw new Error(`${bench} needs Redis: set REDIS_URL or install redis-server`)
  const privateServer = await startPrivateRedis()
  return { url: privateServer.url, privateServer }
}
