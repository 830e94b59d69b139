/**
 * Where a miss spends its time, measured from outside the cache (so the same probe reads
 * stampede-guard and the spin lock): every Redis command this worker sends is counted by
 * kind and timed to its reply, and attributed to the item whose key it names.
 *
 * A key's "flight" here is a request that found no request for the same item running in
 * this worker; what is measured from its start:
 * - first command: until the first Redis command naming the item is sent (budget queues,
 *   read batching and the scheduler show up here);
 * - loader start: until the database query starts (first command + lookups + script);
 * - loader: the query itself; commit sent: from its end until the write naming the item is sent.
 * Across processes: a waiter's wake-up is the time from the leader's commit answer (in any
 * worker) to the waiter's `waited` event (merged by the harness on one absolute clock).
 *
 * Samples are kept per phase up to a cap (reservoir), so a long run reports percentiles
 * from a uniform sample without growing.
 */
import { monitorEventLoopDelay, type IntervalHistogram } from 'node:perf_hooks'
import { Redis } from 'ioredis'
import { absoluteNow } from '../db/query-counter.js'
import type { ProbeReport } from './protocol.js'

export type { ProbeReport } from './protocol.js'

/** Most samples kept per phase and worker. */
const SAMPLE_CAP = 20_000

interface FlightMark {
  startedAt: number
  open: number
  firstCommandAt?: number
  loaderEndedAt?: number
}

type ScriptNames = Map<string, string>

/** `<ns>:{k:<id>}…` (stampede-guard) or `spin:<ns>:<id>[:lock]` (the spin lock). */
const ITEM_IN_KEY = /\{k:(\d+)\}|^spin:.*:(\d+)(?::lock)?$/

/** Commands whose reply times are the item's commit (stampede-guard's commit script; the spin lock's SET … PX). */
const COMMIT_KINDS = new Set(['commit', 'set'])

/** `stampedeGuardGetOrLock` → `get-or-lock`. */
const scriptKind = (name: string): string =>
  name.replace(/^stampedeGuard/, '').replace(/[A-Z]/g, (c, at: number) => (at > 0 ? '-' : '') + c.toLowerCase())

export class MissProbe {
  active = false
  private report = emptyReport()
  private seen: Record<string, number> = {}
  private readonly flights = new Map<string, FlightMark>()
  private readonly lastArrival = new Map<string, number>()
  private readonly scriptNames = new WeakMap<object, ScriptNames>()
  private loop: IntervalHistogram | undefined
  private cpuAtStart = process.cpuUsage()

  /** Patches ioredis once for this process: every client (the subscriber connection too) reports to the probe. */
  install(): void {
    const original = Redis.prototype.sendCommand
    // eslint-disable-next-line @typescript-eslint/no-this-alias
    const probe = this
    Redis.prototype.sendCommand = function (this: Redis, command, stream) {
      if (probe.active) probe.sent(this, command as unknown as SentCommand)
      return original.call(this, command, stream)
    } as typeof original
  }

  start(): void {
    this.report = emptyReport()
    this.seen = {}
    this.flights.clear()
    this.lastArrival.clear()
    this.loop?.disable()
    this.loop = monitorEventLoopDelay({ resolution: 5 })
    this.loop.enable()
    this.cpuAtStart = process.cpuUsage()
    this.active = true
  }

  /** The run's report; the probe stays off until the next start(). */
  take(): ProbeReport {
    this.active = false
    const cpu = process.cpuUsage(this.cpuAtStart)
    this.report.cpuMs = (cpu.user + cpu.system) / 1000
    const loop = this.loop
    if (loop) {
      loop.disable()
      const ms = (ns: number) => Math.round(ns / 1e4) / 100
      this.report.loopDelay = { p50: ms(loop.percentile(50)), p99: ms(loop.percentile(99)), max: ms(loop.max) }
    }
    return this.report
  }

  requestStarted(item: string): void {
    if (!this.active) return
    const now = performance.now()
    this.report.requests++
    const at = Math.round(absoluteNow())
    if (this.lastArrival.get(item) !== at) {
      this.lastArrival.set(item, at)
      ;(this.report.arrivals[item] ??= []).push(at)
    }
    const flight = this.flights.get(item)
    if (flight) flight.open++
    else {
      this.flights.set(item, { startedAt: now, open: 1 })
      this.report.flights++
    }
  }

  requestEnded(item: string): void {
    const flight = this.flights.get(item)
    if (!flight || --flight.open > 0) return
    if (flight.firstCommandAt === undefined) this.report.flightsWithoutRedis++
    this.flights.delete(item)
  }

  loaderStarted(item: string): number {
    const now = performance.now()
    const flight = this.flights.get(item)
    if (this.active && flight) this.sample('miss → loader start', now - flight.startedAt)
    return now
  }

  loaderEnded(item: string, startedAt: number): void {
    const now = performance.now()
    if (!this.active) return
    this.sample('loader', now - startedAt)
    const flight = this.flights.get(item)
    if (flight) flight.loaderEndedAt = now
  }

  /** A wait on another process's load ended with its value (stampede-guard's `waited` event). */
  waitedForValue(item: string): void {
    if (this.active) this.report.wakes.push([item, absoluteNow()])
  }

  private sent(client: Redis, command: SentCommand): void {
    const sentAt = performance.now()
    const kind = this.kindOf(client, command)
    this.report.commands[kind] = (this.report.commands[kind] ?? 0) + 1
    const items = itemsIn(command.args)
    for (const item of items) {
      const flight = this.flights.get(item)
      if (!flight) continue
      if (flight.firstCommandAt === undefined) {
        flight.firstCommandAt = sentAt
        this.sample('miss → first command', sentAt - flight.startedAt)
      }
      if (COMMIT_KINDS.has(kind) && flight.loaderEndedAt !== undefined) {
        this.sample('loader end → commit sent', sentAt - flight.loaderEndedAt)
        flight.loaderEndedAt = undefined
      }
    }
    const answered = () => {
      if (!this.active) return
      this.sample(`${kind} round trip`, performance.now() - sentAt)
      if (COMMIT_KINDS.has(kind) && items.length === 1) (this.report.commits[items[0]!] ??= []).push(absoluteNow())
    }
    command.promise.then(answered, answered)
  }

  private kindOf(client: Redis, command: SentCommand): string {
    const name = command.name.toLowerCase()
    if (name === 'set') return command.args.includes('NX') ? 'set-nx' : 'set'
    if (name !== 'evalsha') return name
    let names = this.scriptNames.get(client)
    const sha = String(command.args[0])
    if (!names?.has(sha)) {
      names = new Map()
      const scripts = (client as unknown as { scriptsSet?: Record<string, { sha: string }> }).scriptsSet ?? {}
      for (const [scriptName, script] of Object.entries(scripts)) names.set(script.sha, scriptKind(scriptName))
      this.scriptNames.set(client, names)
    }
    return names.get(sha) ?? 'evalsha'
  }

  private sample(phase: string, ms: number): void {
    const kept = (this.report.samples[phase] ??= [])
    const seen = (this.seen[phase] = (this.seen[phase] ?? 0) + 1)
    const value = Math.round(ms * 100) / 100
    if (kept.length < SAMPLE_CAP) kept.push(value)
    else {
      const slot = Math.floor(Math.random() * seen)
      if (slot < SAMPLE_CAP) kept[slot] = value
    }
  }
}

interface SentCommand {
  name: string
  args: unknown[]
  promise: Promise<unknown>
}

function itemsIn(args: unknown[]): string[] {
  const items: string[] = []
  for (const arg of args) {
    if (typeof arg !== 'string' && !Buffer.isBuffer(arg)) continue
    const text = typeof arg === 'string' ? arg : arg.length < 200 ? arg.toString('latin1') : ''
    const match = ITEM_IN_KEY.exec(text)
    const item = match?.[1] ?? match?.[2]
    if (item !== undefined && !items.includes(item)) items.push(item)
  }
  return items
}

function emptyReport(): ProbeReport {
  return {
    samples: {},
    loopDelay: { p50: 0, p99: 0, max: 0 },
    cpuMs: 0,
    commands: {},
    requests: 0,
    flights: 0,
    flightsWithoutRedis: 0,
    arrivals: {},
    commits: {},
    wakes: [],
  }
}
