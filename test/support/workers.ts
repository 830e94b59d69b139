/**
 * Real child processes for cross-process tests (several "app instances" sharing one Redis).
 * Workers are .ts modules run through tsx (`--import tsx`) that call serveRequests() from
 * ./worker-side.ts. Every worker is tracked and SIGKILLed on process exit; workers also
 * exit by themselves when their IPC channel closes.
 */
import { fork, type ChildProcess } from 'node:child_process'
import { createRequire } from 'node:module'
import path from 'node:path'
import { createInterface } from 'node:readline'
import { fileURLToPath, pathToFileURL } from 'node:url'
import type { SerializedError, WorkerReply } from './worker-side.js'

const READY_TIMEOUT_MS = 60_000
const DEFAULT_REQUEST_TIMEOUT_MS = 30_000
const STOP_TIMEOUT_MS = 5_000

/** Absolute URL of tsx's loader, so workers do not depend on the cwd. */
const tsxLoader = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href

export interface Worker {
  pid: number
  /** Send `message` to the worker's handler; resolves with its value, rejects with its error. */
  request<T>(message: unknown, timeoutMs?: number): Promise<T>
  /** Send a signal (default SIGKILL: simulates a crashed instance). */
  kill(signal?: NodeJS.Signals): void
  /** Exit code (null when killed by a signal). */
  exited: Promise<number | null>
  /** Graceful: close IPC (worker exits), wait (bounded), then SIGKILL. */
  stop(): Promise<void>
}

export interface ForkWorkerOptions {
  env?: Record<string, string>
  args?: string[]
}

const liveWorkers = new Set<ChildProcess>()
process.on('exit', () => {
  for (const child of liveWorkers) child.kill('SIGKILL')
})

export class WorkerError extends Error {
  constructor(remote: SerializedError, pid: number) {
    super(`[worker ${pid}] ${remote.message}`)
    this.name = remote.name
    if (remote.stack) this.stack = `${this.name}: ${this.message}\n--- remote stack ---\n${remote.stack}`
    if (remote.code !== undefined) Object.assign(this, { code: remote.code })
  }
}

/**
 * Fork `modulePath` (a .ts/.js file; relative paths resolve against the cwd) and resolve once
 * it has sent 'ready' (bounded). Its stdout/stderr are forwarded line by line, prefixed.
 */
export function forkWorker(modulePath: string | URL, options: ForkWorkerOptions = {}): Promise<Worker> {
  const file = modulePath instanceof URL ? fileURLToPath(modulePath) : path.resolve(modulePath)
  const child = fork(file, options.args ?? [], {
    execArgv: ['--import', tsxLoader],
    env: { ...process.env, ...options.env },
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    serialization: 'advanced', // Buffers, Maps, BigInts, Errors survive the trip
  })
  liveWorkers.add(child)
  const pid = child.pid ?? -1

  let stderrTail = ''
  const forward = (stream: NodeJS.ReadableStream | null, out: NodeJS.WriteStream, isErr: boolean) => {
    if (!stream) return
    createInterface({ input: stream }).on('line', (line) => {
      if (isErr) stderrTail = (stderrTail + line + '\n').slice(-4000)
      out.write(`[worker ${pid}] ${line}\n`)
    })
  }
  forward(child.stdout, process.stdout, false)
  forward(child.stderr, process.stderr, true)

  const pending = new Map<number, { resolve(v: unknown): void; reject(e: Error): void; timer: NodeJS.Timeout }>()
  let exitInfo: string | undefined
  const exited = new Promise<number | null>((resolve) => {
    child.once('exit', (code, signal) => {
      liveWorkers.delete(child)
      exitInfo = `exited with ${signal ?? `code ${code}`}`
      for (const [, p] of pending) {
        clearTimeout(p.timer)
        p.reject(new Error(`worker ${pid} ${exitInfo} before replying\n${stderrTail}`))
      }
      pending.clear()
      resolve(code)
    })
  })

  let nextId = 1
  const worker: Worker = {
    pid,
    exited,
    request<T>(message: unknown, timeoutMs = DEFAULT_REQUEST_TIMEOUT_MS): Promise<T> {
      if (exitInfo || !child.connected)
        return Promise.reject(new Error(`worker ${pid} is not running (${exitInfo ?? 'disconnected'})`))
      const id = nextId++
      return new Promise<T>((resolve, reject) => {
        const timer = setTimeout(() => {
          pending.delete(id)
          reject(new Error(`worker ${pid}: no reply to request ${id} within ${timeoutMs} ms`))
        }, timeoutMs)
        pending.set(id, { resolve: resolve as (v: unknown) => void, reject, timer })
        child.send({ id, message }, (err) => {
          if (!err) return
          clearTimeout(timer)
          pending.delete(id)
          reject(err)
        })
      })
    },
    kill(signal: NodeJS.Signals = 'SIGKILL') {
      if (!exitInfo) child.kill(signal)
    },
    async stop() {
      if (exitInfo) return
      if (child.connected) child.disconnect()
      const timer = setTimeout(() => child.kill('SIGKILL'), STOP_TIMEOUT_MS)
      await exited
      clearTimeout(timer)
    },
  }

  child.on('message', (msg: WorkerReply | 'ready') => {
    if (msg === 'ready' || typeof msg !== 'object' || msg === null) return
    const p = pending.get(msg.id)
    if (!p) return
    pending.delete(msg.id)
    clearTimeout(p.timer)
    if (msg.ok) p.resolve(msg.value)
    else p.reject(new WorkerError(msg.error, pid))
  })

  return new Promise<Worker>((resolve, reject) => {
    let settled = false
    const fail = (why: string) => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      child.kill('SIGKILL')
      reject(new Error(`worker ${file} (pid ${pid}) ${why}\n${stderrTail}`))
    }
    const timer = setTimeout(() => fail(`sent no 'ready' within ${READY_TIMEOUT_MS} ms`), READY_TIMEOUT_MS)
    child.once('error', (err) => fail(`failed: ${err.message}`))
    // 'close' (not 'exit') so the stderr tail in the error is complete.
    child.once('close', () => fail(exitInfo ?? 'exited'))
    child.on('message', function onReady(msg: unknown) {
      if (msg !== 'ready' || settled) return
      settled = true
      clearTimeout(timer)
      child.off('message', onReady)
      resolve(worker)
    })
  })
}
