/**
 * A local Sentinel set-up of real processes (launched and killed by pid through
 * test/support/redis.ts): one primary, one replica, three sentinels, with a small
 * down-after-milliseconds and failover-timeout so a promotion takes a few seconds.
 */
import { Redis, type RedisOptions } from 'ioredis'
import { adminClients, HOST, parseInfo, sleep, startRedisProcess, type RedisServer } from './redis.js'

const READY_TIMEOUT_MS = 30_000
export const SENTINEL_MASTER_NAME = 'sg-primary'
/** down-after-milliseconds: small for fast promotion, large enough for a busy 2-core box. */
export const SENTINEL_DOWN_AFTER_MS = 1_000

export interface SentinelHandle {
  readonly masterName: string
  /** The two data nodes (primary first at start; roles change with failovers). */
  readonly servers: RedisServer[]
  readonly sentinels: RedisServer[]
  readonly sentinelNodes: { host: string; port: number }[]
  /** New ioredis client that finds the primary through the sentinels; disconnected on stop(). */
  client(options?: RedisOptions): Redis
  /** The primary every running sentinel reports (throws if they disagree or none answers). */
  primary(): Promise<RedisServer>
  /** `SENTINEL FAILOVER` (no agreement needed); resolves with the new primary once healthy. */
  failover(): Promise<RedisServer>
  /**
   * Waits (bounded) until every running sentinel reports a primary other than `not` (if
   * given), that server says role:master, and the other data node (if running) replicates it.
   */
  waitHealthy(options?: { not?: RedisServer; timeoutMs?: number }): Promise<RedisServer>
  /**
   * Restarts `server` if it is down and makes it a replica of the current primary, as the
   * sentinels would on their next INFO round (up to 10 s later); resolves once healthy.
   */
  rejoin(server: RedisServer): Promise<void>
  /** An admin client on one process, disconnected on stop(). */
  admin(server: RedisServer): Redis
  stop(): Promise<void>
}

export interface StartSentinelOptions {
  downAfterMs?: number
  /** failover-timeout, ms; default 5000. */
  failoverTimeoutMs?: number
}

export async function startSentinel(options: StartSentinelOptions = {}): Promise<SentinelHandle> {
  const downAfter = options.downAfterMs ?? SENTINEL_DOWN_AFTER_MS
  const failoverTimeout = options.failoverTimeoutMs ?? 5_000
  const servers: RedisServer[] = []
  const sentinels: RedisServer[] = []
  const admins = adminClients()
  const admin = admins.admin
  const clients = new Set<Redis>()
  const stop = async () => {
    for (const c of clients) c.disconnect()
    clients.clear()
    admins.disconnect()
    await Promise.all([...sentinels, ...servers].map((s) => s.stop()))
  }

  const reportedPrimary = async (sentinel: RedisServer): Promise<RedisServer | undefined> => {
    const [, port] =
      ((await admin(sentinel).call('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', SENTINEL_MASTER_NAME)) as
        [string, string] | null) ?? []
    return servers.find((s) => String(s.port) === port)
  }

  const unhealthyReason = async (not: RedisServer | undefined): Promise<{ why: string; primary?: RedisServer }> => {
    const live = sentinels.filter((s) => s.running)
    const reported = await Promise.all(live.map(reportedPrimary))
    const primary = reported[0]
    if (!primary || reported.some((p) => p !== primary))
      return { why: `sentinels report ${reported.map((p) => p?.port).join(', ')}` }
    if (primary === not) return { why: `sentinels still report ${primary.port}` }
    if (!primary.running) return { why: `reported primary ${primary.port} is not running` }
    const role = parseInfo(await admin(primary).info('replication'))
    if (role.role !== 'master') return { why: `${primary.port} is ${role.role}` }
    for (const sentinel of live) {
      const fields = (await admin(sentinel).call('SENTINEL', 'MASTER', SENTINEL_MASTER_NAME)) as string[]
      const field = (name: string) => fields[fields.indexOf(name) + 1]
      if (Number(field('num-other-sentinels')) < live.length - 1)
        return { why: `sentinel ${sentinel.port} knows ${field('num-other-sentinels')} others` }
      if (/o_down|s_down|failover_in_progress/.test(field('flags') ?? ''))
        return { why: `sentinel ${sentinel.port}: ${field('flags')}` }
    }
    const replica = servers.find((s) => s !== primary && s.running)
    if (replica) {
      const info = parseInfo(await admin(replica).info('replication'))
      if (
        info.role !== 'slave' ||
        info.master_port !== String(primary.port) ||
        info.master_link_status !== 'up' ||
        info.master_sync_in_progress !== '0'
      ) {
        return {
          why: `replica ${replica.port}: role ${info.role}, master ${info.master_port}, link ${info.master_link_status}`,
        }
      }
      const slaves = (await Promise.all(
        live.map((s) => admin(s).call('SENTINEL', 'REPLICAS', SENTINEL_MASTER_NAME)),
      )) as string[][][]
      // Sentinels learn of a replica from the primary's INFO (every 10 s outside a failover):
      // a majority knowing it is what a promotion needs.
      const seeing = slaves.filter((list) =>
        list.some(
          (fields) =>
            fields[fields.indexOf('port') + 1] === String(replica.port) &&
            !/s_down/.test(fields[fields.indexOf('flags') + 1] ?? ''),
        ),
      ).length
      if (seeing < Math.floor(live.length / 2) + 1) return { why: `${seeing} sentinels see replica ${replica.port} up` }
    }
    return { why: '', primary }
  }

  const waitHealthy = async ({ not, timeoutMs = READY_TIMEOUT_MS }: { not?: RedisServer; timeoutMs?: number } = {}) => {
    const deadline = Date.now() + timeoutMs
    let why = ''
    for (;;) {
      try {
        const state = await unhealthyReason(not)
        if (state.primary) return state.primary
        why = state.why
      } catch (err) {
        why = (err as Error).message
      }
      if (Date.now() > deadline) throw new Error(`sentinel set-up not healthy within ${timeoutMs} ms: ${why}`)
      await sleep(100)
    }
  }

  const rejoin = async (server: RedisServer) => {
    if (!server.running) await server.restart()
    const deadline = Date.now() + READY_TIMEOUT_MS
    for (;;) {
      const reported = await reportedPrimary(sentinels.find((s) => s.running)!).catch(() => undefined)
      if (reported && reported !== server) {
        // As Sentinel reconfigures a node: its clients are disconnected, so they look up the
        // new primary instead of getting READONLY from this one.
        await admin(server)
          .multi()
          .call('REPLICAOF', HOST, String(reported.port))
          .call('CLIENT', 'KILL', 'TYPE', 'normal')
          .call('CLIENT', 'KILL', 'TYPE', 'pubsub')
          .exec()
          .catch(() => {}) // our own connection is among those killed
        break
      }
      if (Date.now() > deadline)
        throw new Error(`no primary other than ${server.port} reported within ${READY_TIMEOUT_MS} ms`)
      await sleep(50)
    }
    await waitHealthy({ not: server })
  }

  try {
    const primary = await startRedisProcess()
    servers.push(primary)
    servers.push(await startRedisProcess({ args: ['--replicaof', HOST, String(primary.port)] }))
    const config = () =>
      [
        `sentinel monitor ${SENTINEL_MASTER_NAME} ${HOST} ${primary.port} 2`,
        `sentinel down-after-milliseconds ${SENTINEL_MASTER_NAME} ${downAfter}`,
        `sentinel failover-timeout ${SENTINEL_MASTER_NAME} ${failoverTimeout}`,
        `sentinel parallel-syncs ${SENTINEL_MASTER_NAME} 1`,
        '',
      ].join('\n')
    sentinels.push(
      ...(await Promise.all(
        Array.from({ length: 3 }, () => startRedisProcess({ configFile: config, args: ['--sentinel'] })),
      )),
    )
    await waitHealthy()
  } catch (err) {
    await stop()
    throw err
  }

  const sentinelNodes = sentinels.map((s) => ({ host: HOST as string, port: s.port }))
  return {
    masterName: SENTINEL_MASTER_NAME,
    servers,
    sentinels,
    sentinelNodes,
    client(clientOptions?: RedisOptions): Redis {
      const c = new Redis({ sentinels: sentinelNodes, name: SENTINEL_MASTER_NAME, ...clientOptions })
      clients.add(c)
      c.once('end', () => clients.delete(c))
      return c
    },
    async primary() {
      const state = await unhealthyReason(undefined)
      if (!state.primary) throw new Error(`no agreed primary: ${state.why}`)
      return state.primary
    },
    async failover() {
      const before = await waitHealthy()
      await admin(sentinels[0]!).call('SENTINEL', 'FAILOVER', SENTINEL_MASTER_NAME)
      await rejoin(before)
      return waitHealthy({ not: before })
    },
    rejoin,
    waitHealthy,
    admin,
    stop,
  }
}
