/**
 * Server processes started by tests (etcd members, ZooKeeper servers): spawned by us, on
 * free 127.0.0.1 ports, in a temp dir of our own, tracked by pid and killed by pid — on
 * stop(), on process exit, on SIGINT/SIGTERM/SIGHUP, and (where util-linux `setpriv`
 * exists) by the kernel through PR_SET_PDEATHSIG if the test process dies uncleanly.
 * Nothing here touches a process it did not start.
 *
 * Data dirs go under /dev/shm when it exists: consensus stores fsync every write, and on
 * a shared 2-core CI disk that alone would dominate the tests' time.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import {
  accessSync,
  constants,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  readdirSync,
  rmSync,
  closeSync,
} from 'node:fs'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { sleep } from './timing.js'

export const HOST = '127.0.0.1' as const
const STOP_TIMEOUT_MS = 10_000
const KILL_TIMEOUT_MS = 5_000
const TMP_PREFIX = 'stampede-guard-srv-'

/** The first executable called `name` on PATH or in `extra`, or undefined. */
export function findExecutable(name: string, extra: string[] = []): string | undefined {
  for (const dir of [...(process.env.PATH ?? '').split(path.delimiter).filter(Boolean), ...extra]) {
    const candidate = path.join(dir, name)
    try {
      accessSync(candidate, constants.X_OK)
      return candidate
    } catch {
      /* not here */
    }
  }
  return undefined
}

/**
 * Logs why a suite is skipped, once, and fails the run instead under `CI=true`: on CI a
 * missing server is a broken image, not a reason to pass.
 */
export function reportMissing(what: string, install: string): void {
  const message = `${what} not found: its tests are SKIPPED. Install it (${install}) to run them.`
  if (process.env.CI === 'true') throw new Error(`CI=true and ${message}`)
  console.warn(`[test/support] ${message}`)
}

const setprivBinary = (() => {
  const bin = findExecutable('setpriv', ['/usr/bin', '/bin'])
  if (!bin) return undefined
  const probe = spawnSync(bin, ['--pdeathsig', 'KILL', '--', 'true'], { stdio: 'ignore', timeout: 5_000 })
  return probe.status === 0 ? bin : undefined
})()

const livePids = new Set<number>()
const reservedPorts = new Set<number>()
let rootDir: string | undefined

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM'
  }
}

/** One dir per test process, named by pid, so dirs a SIGKILLed test process left are swept. */
export function tmpRoot(): string {
  if (rootDir) return rootDir
  const base = existsSync('/dev/shm') ? '/dev/shm' : os.tmpdir()
  for (const name of readdirSync(base)) {
    const owner = name.startsWith(TMP_PREFIX) ? /^(\d+)-/.exec(name.slice(TMP_PREFIX.length)) : null
    if (owner && !pidAlive(Number(owner[1]))) rmSync(path.join(base, name), { recursive: true, force: true })
  }
  rootDir = mkdtempSync(path.join(base, `${TMP_PREFIX}${process.pid}-`))
  return rootDir
}

/** A fresh directory under the test process's temp root. */
export function tmpDir(name: string): string {
  const dir = mkdtempSync(path.join(tmpRoot(), `${name}-`))
  mkdirSync(dir, { recursive: true })
  return dir
}

function killAllSync(): void {
  for (const pid of livePids) {
    try {
      process.kill(pid, 'SIGKILL')
    } catch {
      /* already gone */
    }
  }
  livePids.clear()
  if (rootDir) rmSync(rootDir, { recursive: true, force: true })
}
process.on('exit', killAllSync)
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
  process.once(signal, () => {
    killAllSync()
    if (process.listenerCount(signal) === 0) process.kill(process.pid, signal)
  })
}

/**
 * A kernel-assigned free loopback port, never handed out twice in this process.
 * `accept`: a further condition (a Redis Cluster node also needs port + 10000).
 */
export async function freePort(accept?: (port: number) => Promise<boolean>): Promise<number> {
  for (let attempt = 0; attempt < 100; attempt++) {
    const port = await new Promise<number>((resolve, reject) => {
      const srv = net.createServer()
      srv.once('error', reject)
      srv.listen({ host: HOST, port: 0, exclusive: true }, () => {
        const { port } = srv.address() as net.AddressInfo
        srv.close(() => resolve(port))
      })
    })
    if (reservedPorts.has(port)) continue
    if (accept && !(await accept(port))) continue
    reservedPorts.add(port)
    return port
  }
  throw new Error('could not find a free 127.0.0.1 port')
}

async function within(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), ms)))
  try {
    return await Promise.race([promise.then(() => true), timeout])
  } finally {
    clearTimeout(timer)
  }
}

export interface ProcessSpec {
  /** What it is, for messages: `etcd member n1`. */
  readonly label: string
  readonly command: string
  readonly args: readonly string[]
  readonly env?: NodeJS.ProcessEnv
  /** stdout and stderr go here (appended). */
  readonly logFile: string
}

/**
 * One server process we own. `start()` spawns it and waits (bounded) for `ready()`;
 * `kill()`/`stop()`/`pause()`/`resume()` act on its pid only.
 */
export class ManagedProcess {
  private child: ChildProcess | undefined
  private exited: Promise<void> = Promise.resolve()
  private paused = false

  constructor(private readonly spec: ProcessSpec) {}

  get pid(): number {
    return this.child?.pid ?? -1
  }

  get running(): boolean {
    return this.child !== undefined
  }

  logTail(lines = 20): string {
    try {
      return readFileSync(this.spec.logFile, 'utf8').trimEnd().split('\n').slice(-lines).join('\n')
    } catch {
      return '(no log)'
    }
  }

  /** Spawns without waiting for readiness (a cluster member cannot be ready alone). */
  spawn(): void {
    if (this.child) throw new Error(`${this.spec.label} is already running (pid ${this.pid})`)
    const log = openSync(this.spec.logFile, 'a')
    const stdio: ['ignore', number, number] = ['ignore', log, log]
    const child = setprivBinary
      ? spawn(setprivBinary, ['--pdeathsig', 'KILL', '--', this.spec.command, ...this.spec.args], {
          stdio,
          env: this.spec.env,
        })
      : spawn(this.spec.command, [...this.spec.args], { stdio, env: this.spec.env })
    closeSync(log)
    child.once('error', () => {}) // a failed spawn has no pid: reported just below
    if (child.pid === undefined) throw new Error(`failed to spawn ${this.spec.command} for ${this.spec.label}`)
    livePids.add(child.pid)
    this.child = child
    this.exited = new Promise<void>((resolve) => {
      child.once('exit', () => {
        if (child.pid !== undefined) livePids.delete(child.pid)
        if (this.child === child) {
          this.child = undefined
          this.paused = false
        }
        resolve()
      })
    })
  }

  /** Resolves once `ready()` is true; throws with the log tail if it exits or `timeoutMs` passes. */
  async waitReady(ready: () => Promise<boolean>, timeoutMs: number): Promise<void> {
    const child = this.child
    const deadline = Date.now() + timeoutMs
    while (Date.now() < deadline) {
      if (this.child !== child || !child)
        throw new Error(`${this.spec.label} exited during start-up:\n${this.logTail()}`)
      if (await ready()) return
      await sleep(50)
    }
    await this.kill()
    throw new Error(`${this.spec.label} was not ready within ${timeoutMs} ms:\n${this.logTail()}`)
  }

  /** Crash: SIGKILL by pid, and wait for the exit. */
  async kill(): Promise<void> {
    if (!this.child) return
    this.signal('SIGKILL')
    if (!(await within(this.exited, KILL_TIMEOUT_MS)))
      throw new Error(`${this.spec.label} (pid ${this.pid}) did not exit within ${KILL_TIMEOUT_MS} ms of SIGKILL`)
  }

  /** Graceful: SIGTERM by pid, wait (bounded), then SIGKILL. */
  async stop(): Promise<void> {
    if (!this.child) return
    this.resume()
    this.signal('SIGTERM')
    if (!(await within(this.exited, STOP_TIMEOUT_MS))) await this.kill()
  }

  pause(): void {
    this.signal('SIGSTOP')
    this.paused = true
  }

  resume(): void {
    if (!this.paused) return
    this.signal('SIGCONT')
    this.paused = false
  }

  private signal(sig: NodeJS.Signals): void {
    const pid = this.child?.pid
    if (pid === undefined) return
    try {
      process.kill(pid, sig)
    } catch {
      /* exited meanwhile */
    }
  }
}

/**
 * A server process behind a test-facing handle (an etcd member, a ZooKeeper server): the
 * handle's crash and pause controls act on that process's pid only.
 */
export class ServerHandle {
  constructor(readonly process: ManagedProcess) {}

  get pid(): number {
    return this.process.pid
  }

  get running(): boolean {
    return this.process.running
  }

  /** SIGKILL, and wait for the exit. */
  kill(): Promise<void> {
    return this.process.kill()
  }

  /** SIGSTOP: the server hangs, its connections stay open. */
  pause(): void {
    this.process.pause()
  }

  /** SIGCONT. */
  resume(): void {
    this.process.resume()
  }
}

/** Sends `request` to a loopback port and resolves everything the server sent until it closed, or undefined (refused, timed out). */
export function exchange(port: number, request: string, timeoutMs = 1_000): Promise<string | undefined> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: HOST, port })
    let reply = ''
    const done = (value: string | undefined) => {
      socket.destroy()
      resolve(value)
    }
    socket.setTimeout(timeoutMs, () => done(undefined))
    socket.once('error', () => done(undefined))
    socket.once('connect', () => socket.write(request))
    socket.on('data', (chunk) => (reply += chunk.toString('utf8')))
    socket.once('end', () => done(reply))
  })
}

/** One HTTP/1.0 GET on loopback, bounded; resolves the body of a 200, or undefined. */
export async function httpGet(port: number, urlPath: string, timeoutMs = 1_000): Promise<string | undefined> {
  const reply = await exchange(port, `GET ${urlPath} HTTP/1.0\r\nHost: ${HOST}\r\n\r\n`, timeoutMs)
  const split = reply?.indexOf('\r\n\r\n') ?? -1
  if (!reply || split < 0 || !/^HTTP\/1\.\d 200 /.test(reply)) return undefined
  return reply.slice(split + 4)
}
