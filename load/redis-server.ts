/**
 * A private, throwaway redis-server for the harness when REDIS_URL is not set.
 *
 * Started on a free 127.0.0.1 port with no persistence (`--save "" --appendonly no`),
 * tracked and stopped by its pid only, and killed synchronously if the harness exits
 * any other way. `stopFor()` is the `outage` scenario: kill, wait, restart on the same
 * port so the app's clients reconnect to the "same" Redis.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { accessSync, constants } from 'node:fs'
import net from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'

const HOST = '127.0.0.1'

export interface PrivateRedis {
  readonly url: string
  readonly port: number
  /** Kill it, wait `ms`, start it again on the same port (empty: no persistence). */
  stopFor(ms: number): Promise<void>
  stop(): Promise<void>
}

/** The redis-server binary, or undefined when it is not installed. */
export function findRedisServer(): string | undefined {
  const candidates = [process.env.REDIS_SERVER_BIN, ...(process.env.PATH ?? '').split(':').map((d) => `${d}/redis-server`), '/usr/bin/redis-server', '/usr/local/bin/redis-server']
  for (const candidate of candidates) {
    if (!candidate) continue
    try {
      accessSync(candidate, constants.X_OK)
      return candidate
    } catch {
      /* not here */
    }
  }
  return undefined
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer()
    srv.once('error', reject)
    srv.listen({ host: HOST, port: 0, exclusive: true }, () => {
      const { port } = srv.address() as net.AddressInfo
      srv.close(() => resolve(port))
    })
  })
}

/** Raw RESP PING: readiness without any client library's retry logic in the way. */
function ping(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: HOST, port })
    const done = (ok: boolean) => {
      socket.destroy()
      resolve(ok)
    }
    socket.setTimeout(500, () => done(false))
    socket.once('error', () => done(false))
    socket.once('connect', () => socket.write('PING\r\n'))
    socket.once('data', (d) => done(d.toString('latin1').startsWith('+PONG')))
  })
}

const livePids = new Set<number>()
function killAllSync(): void {
  for (const pid of livePids) {
    try {
      process.kill(pid, 'SIGKILL')
    } catch {
      /* already gone */
    }
  }
  livePids.clear()
}
process.on('exit', killAllSync)
// Ctrl-C does not run 'exit' handlers: kill our servers, then die of the signal as usual.
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
  process.once(signal, () => {
    killAllSync()
    if (process.listenerCount(signal) === 0) process.kill(process.pid, signal)
  })
}

export async function startPrivateRedis(binary: string): Promise<PrivateRedis> {
  const port = await freePort()
  let child: ChildProcess | undefined

  async function start(): Promise<void> {
    const proc = spawn(binary, ['--port', String(port), '--bind', HOST, '--save', '', '--appendonly', 'no', '--daemonize', 'no', '--loglevel', 'warning'], {
      stdio: 'ignore',
    })
    if (proc.pid === undefined) throw new Error(`could not start ${binary}`)
    const pid = proc.pid
    livePids.add(pid)
    let exited = false
    proc.once('exit', () => {
      exited = true
      livePids.delete(pid)
    })
    child = proc
    const deadline = Date.now() + 10_000
    while (Date.now() < deadline) {
      if (exited) throw new Error(`redis-server exited at startup (port ${port})`)
      if (await ping(port)) return
      await sleep(50)
    }
    throw new Error(`redis-server on port ${port} did not answer PING within 10 s`)
  }

  async function kill(signal: NodeJS.Signals): Promise<void> {
    const proc = child
    if (!proc || proc.exitCode !== null || proc.signalCode !== null) return
    const gone = new Promise((r) => proc.once('exit', r))
    proc.kill(signal)
    const timer = setTimeout(() => proc.kill('SIGKILL'), 5_000)
    await gone
    clearTimeout(timer)
    child = undefined
  }

  await start()
  return {
    url: `redis://${HOST}:${port}`,
    port,
    async stopFor(ms) {
      await kill('SIGKILL')
      await sleep(ms)
      // The port can linger for a moment after a kill: retry a few times.
      for (let attempt = 1; ; attempt++) {
        try {
          return await start()
        } catch (err) {
          if (attempt >= 10) throw err
          await sleep(200)
        }
      }
    },
    stop: () => kill('SIGTERM'),
  }
}

/** What a benchmark runs against: REDIS_URL if set, else a private redis-server it must stop. */
export async function benchRedis(bench: string): Promise<{ url: string; privateServer: PrivateRedis | undefined }> {
  if (process.env.REDIS_URL) return { url: process.env.REDIS_URL, privateServer: undefined }
  const binary = findRedisServer()
  if (!binary) throw new Error(`${bench} needs Redis: set REDIS_URL or install redis-server`)
  const privateServer = await startPrivateRedis(binary)
  return { url: privateServer.url, privateServer }
}
