/**
 * Real, throwaway redis-server processes for tests (no mocks).
 *
 * Every server is started by us on a free 127.0.0.1 port with its own temp dir, is
 * tracked by pid, and is killed by pid: on stop(), on process exit (synchronously), on
 * SIGINT/SIGTERM/SIGHUP, and — where util-linux `setpriv` exists — by the kernel via
 * PR_SET_PDEATHSIG if the test process dies without running any handler (e.g. SIGKILL).
 * Nothing here ever connects to a Redis it did not start (the machine's 6379 included).
 */
import { accessSync, constants, mkdirSync, writeFileSync } from 'node:fs'
import net from 'node:net'
import path from 'node:path'
import { Redis, type RedisOptions } from 'ioredis'
import { HOST, ManagedProcess, findExecutable, freePort, tmpRoot } from './managed-process.js'
import { sleep } from './timing.js'

export { HOST, sleep }
const READY_TIMEOUT_MS = 10_000

/** Resolved redis-server path (REDIS_SERVER_BIN overrides the PATH lookup), or undefined. */
export const redisServerBinary: string | undefined = (() => {
  const override = process.env.REDIS_SERVER_BIN
  if (override) {
    try {
      accessSync(override, constants.X_OK)
      return override
    } catch {
      return undefined
    }
  }
  return findExecutable('redis-server', ['/usr/bin', '/usr/local/bin', '/usr/sbin'])
})()

/** Use as `describe.skipIf(!redisAvailable)`; the reason is printed once per test process. */
export const redisAvailable: boolean = redisServerBinary !== undefined
if (!redisAvailable) {
  console.warn(
    '[test/support/redis] redis-server not found on PATH (or REDIS_SERVER_BIN): ' +
      'Redis-backed tests are SKIPPED. Install it (apt-get install redis-server) to run them.',
  )
}

const allServers = new Set<ManagedRedis>()

// ---------------------------------------------------------------- small helpers

function canListen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = net.createServer()
    srv.once('error', () => resolve(false))
    srv.listen({ host: HOST, port, exclusive: true }, () => srv.close(() => resolve(true)))
  })
}

/** A cluster node also needs port+10000 (the bus). */
const busPortFree = (port: number): Promise<boolean> =>
  port + 10000 > 65535 ? Promise.resolve(false) : canListen(port + 10000)

/** Raw RESP PING, so readiness checks never involve ioredis reconnect logic. */
function ping(port: number, timeoutMs = 500): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: HOST, port })
    let buf = ''
    const done = (ok: boolean) => {
      socket.destroy()
      resolve(ok)
    }
    socket.setTimeout(timeoutMs, () => done(false))
    socket.once('error', () => done(false))
    socket.once('connect', () => socket.write('PING\r\n'))
    socket.on('data', (d) => {
      buf += d.toString('latin1')
      if (buf.includes('\r\n')) done(buf.startsWith('+PONG'))
    })
  })
}

// ---------------------------------------------------------------- servers

export interface RedisServer {
  readonly host: '127.0.0.1'
  readonly port: number
  readonly url: string
  /** pid of the current process (changes after restart()); -1 while not running. */
  readonly pid: number
  /** Whether the process is running (false after stop()/kill() until restart()). */
  readonly running: boolean
  /** The server's own temp dir (its log, config and nodes.conf). */
  readonly dir: string
  /** New ioredis client to this server; tracked and disconnected on stop(). */
  client(options?: RedisOptions): Redis
  /** Graceful: disconnect tracked clients, SIGTERM by pid, wait (bounded, then SIGKILL). */
  stop(): Promise<void>
  /** Crash: SIGKILL by pid and wait for exit. Clients are left connected (they see the outage). */
  kill(): Promise<void>
  /** SIGSTOP: the server hangs (TCP still accepts, nothing answers). */
  pause(): void
  /** SIGCONT. */
  resume(): void
  /** Start again on the SAME port after stop()/kill() (new pid); resolves once PING answers. */
  restart(): Promise<void>
}

export interface StartRedisOptions {
  /** Extra redis-server arguments, appended after the defaults (so they win). */
  args?: string[]
}

class ManagedRedis implements RedisServer {
  readonly host = HOST
  readonly url: string
  private readonly process: ManagedProcess
  private readonly clients = new Set<Redis>()

  constructor(
    readonly port: number,
    readonly dir: string,
    argv: string[],
  ) {
    this.url = `redis://${HOST}:${port}`
    const logFile = path.join(dir, 'redis.log')
    this.process = new ManagedProcess({
      label: `redis on port ${port}`,
      command: redisServerBinary!,
      args: [...argv, '--logfile', logFile],
      logFile,
    })
  }

  get pid(): number {
    return this.process.pid
  }

  get running(): boolean {
    return this.process.running
  }

  logTail(lines = 15): string {
    return this.process.logTail(lines)
  }

  /** Spawn and wait for PING; throws (with the log tail) if it exits or does not answer in time. */
  async spawnAndWait(): Promise<void> {
    this.process.spawn()
    try {
      await this.process.waitReady(() => ping(this.port), READY_TIMEOUT_MS)
    } catch (err) {
      const log = this.logTail()
      throw this.process.running || !/address already in use/i.test(log) ? err : new RedisStartError(this.port, log)
    }
  }

  client(options?: RedisOptions): Redis {
    const client = new Redis({ host: HOST, port: this.port, ...options })
    this.clients.add(client)
    client.once('end', () => this.clients.delete(client))
    return client
  }

  async stop(): Promise<void> {
    for (const c of this.clients) c.disconnect()
    this.clients.clear()
    await this.process.stop()
  }

  kill(): Promise<void> {
    return this.process.kill()
  }

  pause(): void {
    this.process.pause()
  }

  resume(): void {
    this.process.resume()
  }

  async restart(): Promise<void> {
    // The port may linger briefly (e.g. another process's transient use): retry, bounded.
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.spawnAndWait()
      } catch (err) {
        if (!(err instanceof RedisStartError && err.addressInUse) || attempt >= 10) throw err
        await sleep(200)
      }
    }
  }
}

class RedisStartError extends Error {
  readonly addressInUse: boolean
  constructor(port: number, log: string) {
    super(`redis-server on port ${port} exited during startup:\n${log}`)
    this.addressInUse = /address already in use/i.test(log)
  }
}

function requireBinary(): void {
  if (!redisServerBinary) {
    throw new Error('redis-server is not installed; guard the suite with describe.skipIf(!redisAvailable)')
  }
}

/** How to launch one redis-server process (a plain node, a cluster node, or a sentinel). */
export interface RedisProcessOptions {
  /** Extra redis-server arguments, appended after the defaults (so they win). */
  args?: string[]
  /** A cluster node: also needs port+10000 free (the cluster bus), gets its own nodes.conf. */
  cluster?: boolean
  /**
   * Writes a config file into the server's dir and passes it first (redis-server needs a
   * config file first; Sentinel rewrites it). Receives the port and dir chosen.
   */
  configFile?: (port: number, dir: string) => string
}

/**
 * The launcher behind every server here: free port, own temp dir, tracked pid, killed on
 * exit. Resolves once the process answers PING. Exported for the cluster/sentinel support.
 */
export async function startRedisProcess(options: RedisProcessOptions = {}): Promise<RedisServer> {
  requireBinary()
  const { args = [], cluster = false, configFile } = options
  for (let attempt = 1; ; attempt++) {
    const port = await freePort(cluster ? busPortFree : undefined)
    const dir = path.join(tmpRoot(), String(port))
    mkdirSync(dir, { recursive: true })
    const config = configFile?.(port, dir)
    if (config !== undefined) writeFileSync(path.join(dir, 'redis.conf'), config)
    const argv = [
      ...(config !== undefined ? [path.join(dir, 'redis.conf')] : []),
      '--port',
      String(port),
      '--bind',
      HOST,
      '--save',
      '',
      '--appendonly',
      'no',
      '--daemonize',
      'no',
      '--dir',
      dir,
      '--enable-debug-command',
      'yes',
      // Replicas sync at once instead of after the default 5 s wait for more replicas.
      '--repl-diskless-sync-delay',
      '0',
      ...(cluster ? ['--cluster-enabled', 'yes', '--cluster-config-file', path.join(dir, `nodes-${port}.conf`)] : []),
      ...args,
    ]
    const server = new ManagedRedis(port, dir, argv)
    try {
      await server.spawnAndWait()
      allServers.add(server)
      return server
    } catch (err) {
      // Someone grabbed the port between our probe and redis' bind: pick another.
      if (err instanceof RedisStartError && err.addressInUse && attempt < 5) continue
      throw err
    }
  }
}

/** Start a standalone redis-server on a fresh loopback port; resolves once it answers PING. */
export async function startRedis(options: StartRedisOptions = {}): Promise<RedisServer> {
  return startRedisProcess({ args: options.args ?? [] })
}

/** Stop every server this process started (handy in a global afterAll). */
export async function stopAllRedis(): Promise<void> {
  await Promise.all([...allServers].map((s) => s.stop()))
}

/** `INFO`/`CLUSTER INFO` text as a field map. */
export function parseInfo(text: string): Record<string, string> {
  const out: Record<string, string> = {}
  for (const line of text.split('\r\n')) {
    const i = line.indexOf(':')
    if (i > 0) out[line.slice(0, i)] = line.slice(i + 1)
  }
  return out
}

/**
 * Admin connections for set-ups of several servers (cluster, sentinel): one per server,
 * made on first use, quick to give up (1 retry, 2 s per command), reconnecting every
 * 100 ms, and quiet about errors (a killed node is expected).
 */
export function adminClients(): { admin(server: RedisServer): Redis; disconnect(): void } {
  const admins = new Map<RedisServer, Redis>()
  return {
    admin(server) {
      let client = admins.get(server)
      if (!client) {
        client = server.client({
          maxRetriesPerRequest: 1,
          connectTimeout: 1_000,
          commandTimeout: 2_000,
          retryStrategy: () => 100,
        })
        client.on('error', () => {})
        admins.set(server, client)
      }
      return client
    },
    disconnect() {
      for (const client of admins.values()) client.disconnect()
      admins.clear()
    },
  }
}
