/**
 * Real etcd members for tests: one member, or a 3-member cluster, on free loopback ports
 * with data dirs of their own, stopped by pid (see ./managed-process.ts).
 *
 * Timings are shortened so the tests stay short on a loaded 2-core CI box: heartbeat
 * 50 ms and election timeout 500 ms (etcd's minimum lease TTL is 1.5 × election timeout,
 * so 1 s leases stay 1 s). Metrics (`/metrics`) answer on each member's client port; the
 * FIFO test reads `etcd_debugging_mvcc_events_total` (events sent to watchers) there.
 */
import { Etcd3, type IOptions } from 'etcd3'
import { mkdirSync } from 'node:fs'
import path from 'node:path'
import {
  findExecutable,
  freePort,
  httpGet,
  HOST,
  ManagedProcess,
  reportMissing,
  ServerHandle,
  tmpDir,
} from './managed-process.js'

const START_TIMEOUT_MS = 20_000
const HEARTBEAT_MS = 50
const ELECTION_MS = 500

export const etcdBinary: string | undefined =
  process.env.ETCD_BIN ?? findExecutable('etcd', ['/usr/bin', '/usr/local/bin'])

/** Use as `describe.skipIf(!etcdAvailable)`; under CI=true a missing etcd fails instead. */
export const etcdAvailable: boolean = etcdBinary !== undefined
if (!etcdAvailable) reportMissing('etcd (or ETCD_BIN)', 'apt-get install etcd-server')

export interface EtcdMember {
  readonly name: string
  readonly clientPort: number
  readonly url: string
  readonly pid: number
  readonly running: boolean
  kill(): Promise<void>
  pause(): void
  resume(): void
  /** Starts again with its data dir (same ports, same identity). */
  restart(): Promise<void>
  /** The value of one Prometheus counter/gauge on this member (sum over its label sets). */
  metric(name: string): Promise<number>
  isLeader(): Promise<boolean>
}

export interface EtcdCluster {
  readonly members: EtcdMember[]
  /** Client URLs of every member. */
  readonly hosts: string[]
  /** A new etcd3 client (to every member unless `members` says otherwise); closed on stop(). */
  client(options?: Partial<IOptions> & { members?: EtcdMember[] }): Etcd3
  /** The current leader, waiting (bounded) for one to be elected. */
  leader(timeoutMs?: number): Promise<EtcdMember>
  stop(): Promise<void>
}

class Member extends ServerHandle implements EtcdMember {
  readonly url: string

  constructor(
    readonly name: string,
    readonly clientPort: number,
    readonly peerPort: number,
    dir: string,
    initialCluster: string,
    clusterToken: string,
  ) {
    const url = `http://${HOST}:${clientPort}`
    const peerUrl = `http://${HOST}:${peerPort}`
    super(
      new ManagedProcess({
        label: `etcd member ${name} (client port ${clientPort})`,
        command: etcdBinary!,
        logFile: path.join(dir, 'etcd.log'),
        args: [
          '--name',
          name,
          '--data-dir',
          path.join(dir, 'data'),
          '--listen-client-urls',
          url,
          '--advertise-client-urls',
          url,
          '--listen-peer-urls',
          peerUrl,
          '--initial-advertise-peer-urls',
          peerUrl,
          '--initial-cluster',
          initialCluster,
          '--initial-cluster-state',
          'new',
          '--initial-cluster-token',
          clusterToken,
          '--heartbeat-interval',
          String(HEARTBEAT_MS),
          '--election-timeout',
          String(ELECTION_MS),
          '--logger',
          'zap',
          '--log-level',
          'warn',
        ],
      }),
    )
    this.url = url
  }

  async restart(): Promise<void> {
    this.process.spawn()
    await this.process.waitReady(() => this.healthy(), START_TIMEOUT_MS)
  }

  async healthy(): Promise<boolean> {
    const body = await httpGet(this.clientPort, '/health')
    return body !== undefined && /"health"\s*:\s*"true"/.test(body)
  }

  async metric(name: string): Promise<number> {
    const body = await httpGet(this.clientPort, '/metrics', 5_000)
    if (body === undefined) throw new Error(`etcd member ${this.name}: /metrics did not answer`)
    let sum = 0
    let seen = false
    for (const line of body.split('\n')) {
      const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)$/.exec(line)
      if (match && match[1] === name) {
        sum += Number(match[3])
        seen = true
      }
    }
    if (!seen) throw new Error(`etcd member ${this.name} exports no metric ${name}`)
    return sum
  }

  async isLeader(): Promise<boolean> {
    return this.running && (await this.metric('etcd_server_is_leader').catch(() => 0)) === 1
  }
}

/**
 * Starts `size` etcd members forming one cluster; resolves once every member reports
 * healthy (which needs an elected leader), or throws after a bounded start-up.
 */
export async function startEtcdCluster(size = 3): Promise<EtcdCluster> {
  if (!etcdBinary) throw new Error('etcd is not installed; guard the suite with describe.skipIf(!etcdAvailable)')
  const ports = await Promise.all(
    Array.from({ length: size }, async () => ({ client: await freePort(), peer: await freePort() })),
  )
  const initialCluster = ports.map((p, i) => `n${i + 1}=http://${HOST}:${p.peer}`).join(',')
  const root = tmpDir('etcd')
  const members = ports.map((p, i) => {
    const dir = path.join(root, `n${i + 1}`)
    mkdirSync(dir, { recursive: true })
    return new Member(`n${i + 1}`, p.client, p.peer, dir, initialCluster, path.basename(root))
  })
  const clients = new Set<Etcd3>()
  const stop = async () => {
    for (const c of clients) c.close()
    clients.clear()
    await Promise.all(members.map((m) => m.process.stop()))
  }
  try {
    for (const m of members) m.process.spawn()
    await Promise.all(members.map((m) => m.process.waitReady(() => m.healthy(), START_TIMEOUT_MS)))
  } catch (err) {
    await stop()
    throw err
  }
  return {
    members,
    hosts: members.map((m) => m.url),
    client(options = {}) {
      const { members: only, ...rest } = options
      const client = new Etcd3({ hosts: (only ?? members).map((m) => m.url), ...rest })
      clients.add(client)
      return client
    },
    async leader(timeoutMs = 10_000) {
      const deadline = Date.now() + timeoutMs
      for (;;) {
        for (const m of members) if (await m.isLeader()) return m
        if (Date.now() > deadline) throw new Error(`no etcd leader elected within ${timeoutMs} ms`)
        await new Promise((resolve) => setTimeout(resolve, 50))
      }
    },
    stop,
  }
}

/** One etcd member (a cluster of one). */
export function startEtcd(): Promise<EtcdCluster> {
  return startEtcdCluster(1)
}
