/**
 * A local Redis Cluster of real redis-server processes (test/support/redis.ts launches and
 * kills each by pid): N masters, optionally with replicas, and the failovers tests need.
 *
 * Nodes run with a small cluster-node-timeout (default 1000 ms) so a SIGKILLed master is
 * replaced in ~2-3 s, and cluster-replica-validity-factor 0 so a replica whose link was cut
 * on purpose (fencing tests) may still be promoted.
 */
import { spawn } from 'node:child_process'
import { accessSync, constants } from 'node:fs'
import path from 'node:path'
import { Cluster, type ClusterOptions, type Redis } from 'ioredis'
import {
  adminClients,
  HOST,
  parseInfo,
  redisServerBinary,
  sleep,
  startRedisProcess,
  type RedisServer,
} from './redis.js'

const SLOTS = 16384
const READY_TIMEOUT_MS = 30_000
const CREATE_TIMEOUT_MS = 30_000
/** Default cluster-node-timeout: small for fast failover in CI, large enough for a busy 2-core box. */
export const CLUSTER_NODE_TIMEOUT_MS = 1_000

/** redis-cli next to redis-server (it ships with it), or on PATH. */
export const redisCliBinary: string | undefined = (() => {
  const candidates = [
    ...(redisServerBinary ? [path.join(path.dirname(redisServerBinary), 'redis-cli')] : []),
    ...(process.env.PATH ?? '')
      .split(path.delimiter)
      .filter(Boolean)
      .map((dir) => path.join(dir, 'redis-cli')),
  ]
  for (const candidate of candidates) {
    try {
      accessSync(candidate, constants.X_OK)
      return candidate
    } catch {
      /* not here */
    }
  }
  return undefined
})()

/** One node as CLUSTER NODES describes it. */
export interface ClusterNodeView {
  server: RedisServer
  id: string
  role: 'master' | 'replica'
  /** For a replica, its master's id. */
  masterId: string | undefined
  /** Slot ranges [from, to] (masters). */
  slots: [number, number][]
  /** Flagged fail/pfail, or not running. */
  failed: boolean
}

export interface RedisClusterHandle {
  /** Every node ever started, masters first at creation; roles change with failovers. */
  nodes: RedisServer[]
  startupNodes: { host: string; port: number }[]
  /** New ioredis Cluster client; tracked and disconnected on stop(). */
  client(options?: ClusterOptions): Cluster
  /** The cluster as a running node sees it now. */
  topology(): Promise<ClusterNodeView[]>
  /** The running nodes that are masters now (with slots). */
  masters(): Promise<RedisServer[]>
  /** The master serving `key`'s slot now, and its replicas. */
  ownerOf(key: string): Promise<{ master: RedisServer; replicas: RedisServer[]; slot: number }>
  /**
   * `CLUSTER FAILOVER [FORCE|TAKEOVER]` on `replica`; resolves once it is a master and
   * every running node reports cluster_state:ok (bounded).
   */
  failover(replica: RedisServer, mode?: 'graceful' | 'force' | 'takeover'): Promise<void>
  /** Waits (bounded) until `server` is a master with slots in every running node's view. */
  waitForMaster(server: RedisServer, timeoutMs?: number): Promise<void>
  /**
   * Waits (bounded) until every running node reports cluster_state:ok with all slots, and
   * every master with slots has `replicas` replicas online and linked.
   */
  waitHealthy(timeoutMs?: number): Promise<void>
  /** An admin client on one node, disconnected on stop(). */
  admin(server: RedisServer): Redis
  stop(): Promise<void>
}

export interface StartClusterOptions {
  /** Number of masters; default 3. */
  masters?: number
  /** Replicas per master; default 0. With replicas, `redis-cli --cluster create` joins the nodes. */
  replicas?: number
  /** cluster-node-timeout, ms; default CLUSTER_NODE_TIMEOUT_MS. */
  nodeTimeoutMs?: number
  /** Extra redis-server arguments for every node. */
  args?: string[]
}

function parseNodes(text: string, byPort: Map<number, RedisServer>): ClusterNodeView[] {
  const views: ClusterNodeView[] = []
  for (const line of text.trim().split('\n')) {
    const [id, address, flags, masterId, , , , , ...slotFields] = line.trim().split(' ')
    const port = Number(/:(\d+)@/.exec(address ?? '')?.[1])
    const server = byPort.get(port)
    if (!id || !flags || !server) continue
    const flagSet = new Set(flags.split(','))
    views.push({
      server,
      id,
      role: flagSet.has('master') ? 'master' : 'replica',
      masterId: masterId === '-' ? undefined : masterId,
      slots: slotFields
        .filter((field) => !field.startsWith('['))
        .map((field) => {
          const [from, to = from] = field.split('-')
          return [Number(from), Number(to)] as [number, number]
        }),
      failed: flagSet.has('fail') || flagSet.has('fail?') || !server.running,
    })
  }
  return views
}

function runCli(args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(redisCliBinary!, args, { stdio: ['ignore', 'pipe', 'pipe'] })
    let output = ''
    child.stdout.on('data', (d) => (output += d))
    child.stderr.on('data', (d) => (output += d))
    const timer = setTimeout(() => child.kill('SIGKILL'), CREATE_TIMEOUT_MS)
    child.once('error', reject)
    child.once('exit', (code, signal) => {
      clearTimeout(timer)
      if (code === 0) resolve(output)
      else
        reject(new Error(`redis-cli ${args.join(' ')} failed (${signal ?? `code ${code}`}):\n${output.slice(-2000)}`))
    })
  })
}

/**
 * A local Redis Cluster. Without replicas, slots are split with CLUSTER ADDSLOTSRANGE and
 * nodes joined with CLUSTER MEET; with replicas, `redis-cli --cluster create
 * --cluster-replicas N --cluster-yes`. Then we wait (bounded) until every node reports
 * cluster_state:ok, all slots assigned, all nodes known, and every replica is in sync.
 */
export async function startCluster(options: StartClusterOptions = {}): Promise<RedisClusterHandle> {
  const masterCount = options.masters ?? 3
  const replicas = options.replicas ?? 0
  if (!Number.isInteger(masterCount) || masterCount < 1) throw new Error(`masters must be >= 1, got ${masterCount}`)
  if (replicas > 0 && masterCount < 3) throw new Error('redis-cli --cluster create needs at least 3 masters')
  if (replicas > 0 && !redisCliBinary) throw new Error('redis-cli not found next to redis-server or on PATH')
  const total = masterCount * (1 + replicas)
  const nodeArgs = [
    '--cluster-node-timeout',
    String(options.nodeTimeoutMs ?? CLUSTER_NODE_TIMEOUT_MS),
    '--cluster-replica-validity-factor',
    '0',
    ...(options.args ?? []),
  ]
  const nodes: RedisServer[] = []
  const clients = new Set<Cluster>()
  const admins = adminClients()
  const admin = admins.admin
  const stop = async () => {
    for (const c of clients) c.disconnect()
    clients.clear()
    admins.disconnect()
    await Promise.all(nodes.map((n) => n.stop()))
  }
  const byPort = () => new Map(nodes.map((n) => [n.port, n]))
  const running = () => nodes.filter((n) => n.running)

  const topology = async (): Promise<ClusterNodeView[]> => {
    let lastError: unknown
    for (const server of running()) {
      try {
        return parseNodes(String(await admin(server).call('CLUSTER', 'NODES')), byPort())
      } catch (err) {
        lastError = err
      }
    }
    throw new Error(`no running cluster node answered CLUSTER NODES: ${(lastError as Error)?.message}`)
  }

  const waitHealthy = async (timeoutMs = READY_TIMEOUT_MS) => {
    const deadline = Date.now() + timeoutMs
    let why = ''
    for (;;) {
      try {
        why = await unhealthyReason()
        if (why === '') return
      } catch (err) {
        why = (err as Error).message
      }
      if (Date.now() > deadline) throw new Error(`cluster not healthy within ${timeoutMs} ms: ${why}`)
      await sleep(100)
    }
  }
  const unhealthyReason = async (): Promise<string> => {
    const live = running()
    for (const server of live) {
      const info = parseInfo(String(await admin(server).call('CLUSTER', 'INFO')))
      if (
        info.cluster_state !== 'ok' ||
        info.cluster_slots_assigned !== String(SLOTS) ||
        info.cluster_known_nodes !== String(nodes.length)
      ) {
        return `node ${server.port}: ${JSON.stringify(info)}`
      }
    }
    const views = await topology()
    for (const view of views) {
      if (view.failed && view.server.pid !== -1) return `node ${view.server.port} is flagged failed`
    }
    // Every live node's view agrees on who masters slots, and no running node is still a slotless
    // master (a replica just joined is one in some views until gossip catches up).
    for (const server of live) {
      const view = parseNodes(String(await admin(server).call('CLUSTER', 'NODES')), byPort())
      const masters = view.filter((v) => v.role === 'master' && !v.failed)
      if (masters.length !== masterCount || masters.some((v) => v.slots.length === 0)) {
        return (
          `node ${server.port} sees ${masters.length} masters ` +
          `(${masters.filter((v) => v.slots.length === 0).length} without slots), expected ${masterCount}`
        )
      }
    }
    for (const master of views.filter((v) => v.role === 'master' && v.slots.length > 0)) {
      const replication = parseInfo(await admin(master.server).info('replication'))
      const online = Object.entries(replication).filter(
        ([field, value]) => /^slave\d+$/.test(field) && value.includes('state=online'),
      ).length
      if (online < replicas) return `master ${master.server.port} has ${online} of ${replicas} replicas online`
    }
    for (const replica of views.filter((v) => v.role === 'replica')) {
      const replication = parseInfo(await admin(replica.server).info('replication'))
      if (replication.master_link_status !== 'up' || replication.master_sync_in_progress !== '0') {
        return `replica ${replica.server.port}: link ${replication.master_link_status}, sync ${replication.master_sync_in_progress}`
      }
    }
    return ''
  }

  const waitForMaster = async (server: RedisServer, timeoutMs = READY_TIMEOUT_MS) => {
    const deadline = Date.now() + timeoutMs
    for (;;) {
      const views = await Promise.all(
        running().map(async (node) =>
          parseNodes(
            String(
              await admin(node)
                .call('CLUSTER', 'NODES')
                .catch(() => ''),
            ),
            byPort(),
          ),
        ),
      )
      const promoted = views.every((view) =>
        view.some((v) => v.server === server && v.role === 'master' && v.slots.length > 0),
      )
      const states = await Promise.all(
        running().map(
          async (node) =>
            parseInfo(
              String(
                await admin(node)
                  .call('CLUSTER', 'INFO')
                  .catch(() => ''),
              ),
            ).cluster_state,
        ),
      )
      if (promoted && states.every((state) => state === 'ok')) return
      if (Date.now() > deadline)
        throw new Error(`node ${server.port} did not become a master with cluster_state:ok within ${timeoutMs} ms`)
      await sleep(50)
    }
  }

  try {
    nodes.push(
      ...(await Promise.all(Array.from({ length: total }, () => startRedisProcess({ cluster: true, args: nodeArgs })))),
    )
    if (replicas === 0) {
      await Promise.all(
        nodes.map((node, i) => {
          const from = Math.floor((i * SLOTS) / masterCount)
          const to = Math.floor(((i + 1) * SLOTS) / masterCount) - 1
          return admin(node).call('CLUSTER', 'ADDSLOTSRANGE', String(from), String(to))
        }),
      )
      await Promise.all(nodes.slice(1).map((n) => admin(nodes[0]!).call('CLUSTER', 'MEET', HOST, String(n.port))))
    } else {
      await runCli([
        '--cluster',
        'create',
        ...nodes.map((n) => `${HOST}:${n.port}`),
        '--cluster-replicas',
        String(replicas),
        '--cluster-yes',
      ])
    }
    await waitHealthy()
  } catch (err) {
    await stop()
    throw err
  }

  const startupNodes = nodes.map((n) => ({ host: HOST as string, port: n.port }))
  return {
    nodes,
    startupNodes,
    client(clusterOptions?: ClusterOptions): Cluster {
      const c = new Cluster(startupNodes, clusterOptions)
      clients.add(c)
      c.once('end', () => clients.delete(c))
      return c
    },
    topology,
    async masters() {
      return (await topology())
        .filter((v) => v.role === 'master' && v.slots.length > 0 && !v.failed)
        .map((v) => v.server)
    },
    async ownerOf(key: string) {
      const live = running()[0]
      if (!live) throw new Error('no cluster node is running')
      const slot = Number(await admin(live).call('CLUSTER', 'KEYSLOT', key))
      const owner = (await topology()).find(
        (v) => v.role === 'master' && !v.failed && v.slots.some(([from, to]) => slot >= from && slot <= to),
      )
      if (!owner) throw new Error(`no live master serves slot ${slot}`)
      // The master's own INFO is authoritative for its replicas; gossip may lag behind it.
      const replication = parseInfo(await admin(owner.server).info('replication'))
      const ports = Object.entries(replication)
        .filter(([field]) => /^slave\d+$/.test(field))
        .map(([, value]) => Number(/port=(\d+)/.exec(value)?.[1]))
      return { master: owner.server, replicas: nodes.filter((n) => ports.includes(n.port)), slot }
    },
    async failover(replica: RedisServer, mode: 'graceful' | 'force' | 'takeover' = 'graceful') {
      await admin(replica).call('CLUSTER', 'FAILOVER', ...(mode === 'graceful' ? [] : [mode.toUpperCase()]))
      await waitForMaster(replica)
    },
    waitForMaster,
    waitHealthy,
    admin,
    stop,
  }
}
