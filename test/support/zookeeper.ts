/**
 * Real ZooKeeper servers for tests: a standalone server, or an N-node ensemble, on free
 * loopback ports with data dirs of their own, stopped by pid (see ./managed-process.ts).
 *
 * The JVM is run directly (QuorumPeerMain with a generated zoo.cfg), not through
 * zkServer.sh's daemon mode, so the pid we hold is the server's. The packaged jars under
 * /usr/share/java are used (zookeeper.jar's manifest lists its dependencies); logging
 * goes through slf4j-simple at WARN into the server's log file. The admin server (port
 * 8080 by default) is off.
 *
 * tickTime is 100 ms, so session timeouts from 200 ms to 2 s are accepted: tests keep
 * their sessions short (the holder-crash test waits for one).
 */
import zookeeper from 'node-zookeeper-client'
import { existsSync, mkdirSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import {
  exchange,
  findExecutable,
  freePort,
  HOST,
  ManagedProcess,
  reportMissing,
  ServerHandle,
  tmpDir,
} from './managed-process.js'

const START_TIMEOUT_MS = 30_000
const CONNECT_TIMEOUT_MS = 10_000
export const TICK_MS = 100

const JARS = ['/usr/share/java/zookeeper.jar', '/usr/share/java/slf4j-simple.jar']
const javaBinary = process.env.JAVA_BIN ?? findExecutable('java', ['/usr/bin'])
const jarsPresent = JARS.every((jar) => existsSync(jar))

/** Use as `describe.skipIf(!zookeeperAvailable)`; under CI=true a missing server fails instead. */
export const zookeeperAvailable: boolean = javaBinary !== undefined && jarsPresent
if (!zookeeperAvailable) reportMissing(`ZooKeeper (java and ${JARS.join(', ')})`, 'apt-get install zookeeper')

export interface ZooKeeperServer {
  readonly id: number
  readonly clientPort: number
  readonly pid: number
  readonly running: boolean
  kill(): Promise<void>
  pause(): void
  resume(): void
  /** `leader`, `follower` or `standalone`; undefined while it does not serve. */
  mode(): Promise<string | undefined>
  /** Starts it again after kill(), with its data dir (same port, same sessions on disk); resolves once it serves. */
  restart(): Promise<void>
}

export interface ZooKeeperEnsemble {
  readonly servers: ZooKeeperServer[]
  /** `127.0.0.1:p1,127.0.0.1:p2,…` */
  readonly connectionString: string
  /** A new client, connected (bounded); closed on stop(). */
  client(options?: Partial<zookeeper.Option>): Promise<zookeeper.Client>
  stop(): Promise<void>
}

class Server extends ServerHandle implements ZooKeeperServer {
  constructor(
    readonly id: number,
    readonly clientPort: number,
    dir: string,
    quorum: string[],
  ) {
    const dataDir = path.join(dir, 'data')
    const config = path.join(dir, 'zoo.cfg')
    const lines = [
      `tickTime=${TICK_MS}`,
      `initLimit=20`,
      `syncLimit=10`,
      `dataDir=${dataDir}`,
      `clientPort=${clientPort}`,
      `clientPortAddress=${HOST}`,
      'admin.enableServer=false',
      '4lw.commands.whitelist=srvr,ruok,mntr',
      'maxClientCnxns=0',
      `minSessionTimeout=${2 * TICK_MS}`,
      `maxSessionTimeout=${20 * TICK_MS}`,
      'preAllocSize=1024',
      'snapCount=1000000',
      'forceSync=no',
      ...quorum,
    ]
    writeFileSync(config, lines.join('\n') + '\n')
    // An ensemble member finds its own id in dataDir/myid.
    if (quorum.length > 0) {
      mkdirSync(dataDir, { recursive: true })
      writeFileSync(path.join(dataDir, 'myid'), `${id}\n`)
    }
    super(
      new ManagedProcess({
        label: `ZooKeeper server ${id} (client port ${clientPort})`,
        command: javaBinary!,
        logFile: path.join(dir, 'zookeeper.log'),
        args: [
          '-Xms32m',
          '-Xmx256m',
          '-XX:+UseSerialGC',
          '-XX:TieredStopAtLevel=1',
          '-Xshare:auto',
          '-Dorg.slf4j.simpleLogger.defaultLogLevel=warn',
          '-Dzookeeper.admin.enableServer=false',
          '-cp',
          JARS.join(':'),
          'org.apache.zookeeper.server.quorum.QuorumPeerMain',
          config,
        ],
      }),
    )
  }

  async restart(): Promise<void> {
    this.process.spawn()
    await this.process.waitReady(async () => (await this.mode()) !== undefined, START_TIMEOUT_MS)
  }

  async mode(): Promise<string | undefined> {
    const reply = await exchange(this.clientPort, 'srvr')
    return reply ? /^Mode:\s*(\S+)/m.exec(reply)?.[1] : undefined
  }
}

/**
 * Starts `size` ZooKeeper servers (1: standalone; 3: an ensemble) and resolves once every
 * one serves (standalone, leader or follower), or throws after a bounded start-up.
 */
export async function startZooKeeperEnsemble(size = 1): Promise<ZooKeeperEnsemble> {
  if (!zookeeperAvailable)
    throw new Error('ZooKeeper is not installed; guard the suite with describe.skipIf(!zookeeperAvailable)')
  const ports = await Promise.all(
    Array.from({ length: size }, async () => ({
      client: await freePort(),
      peer: await freePort(),
      election: await freePort(),
    })),
  )
  const quorum = size === 1 ? [] : ports.map((p, i) => `server.${i + 1}=${HOST}:${p.peer}:${p.election}`)
  const root = tmpDir('zookeeper')
  const servers = ports.map((p, i) => {
    const dir = path.join(root, `s${i + 1}`)
    mkdirSync(dir, { recursive: true })
    return new Server(i + 1, p.client, dir, quorum)
  })
  const clients = new Set<zookeeper.Client>()
  const stop = async () => {
    for (const c of clients) c.close()
    clients.clear()
    await Promise.all(servers.map((s) => s.process.kill()))
  }
  try {
    for (const s of servers) s.process.spawn()
    await Promise.all(
      servers.map((s) => s.process.waitReady(async () => (await s.mode()) !== undefined, START_TIMEOUT_MS)),
    )
  } catch (err) {
    await stop()
    throw err
  }
  const connectionString = servers.map((s) => `${HOST}:${s.clientPort}`).join(',')
  return {
    servers,
    connectionString,
    async client(options = {}) {
      const client = await connectZooKeeper(connectionString, options)
      clients.add(client)
      return client
    },
    stop,
  }
}

/** A node-zookeeper-client client, connected (bounded: rejects after 10 s). Short sessions by default: 2 s. */
export async function connectZooKeeper(
  connectionString: string,
  options: Partial<zookeeper.Option> = {},
): Promise<zookeeper.Client> {
  const client = zookeeper.createClient(connectionString, {
    sessionTimeout: 2_000,
    spinDelay: 100,
    retries: 0,
    ...options,
  })
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      client.close()
      reject(new Error(`ZooKeeper client did not connect to ${connectionString} within ${CONNECT_TIMEOUT_MS} ms`))
    }, CONNECT_TIMEOUT_MS)
    client.once('connected', () => {
      clearTimeout(timer)
      resolve()
    })
    client.connect()
  })
  return client
}

/** A standalone ZooKeeper server. */
export function startZooKeeper(): Promise<ZooKeeperEnsemble> {
  return startZooKeeperEnsemble(1)
}
