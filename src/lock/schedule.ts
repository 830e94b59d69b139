import { MAX_TIMER_MS, parseDuration, type Duration } from '../duration.js'
import { InvalidArgumentError } from '../errors.js'

/** One firing of a schedule. */
export interface Tick {
  /** The instant this tick is for (not when the timer actually fired). */
  readonly at: Date
  /** 0 for the first tick of this schedule, then 1, 2, … */
  readonly index: number
  /** Aborted when the schedule is stopped. */
  readonly signal: AbortSignal
}

export interface ScheduleOptions {
  /**
   * Fire every this long, at whole multiples of it since the Unix epoch (every instance
   * running the same schedule fires the same ticks). Milliseconds or `'30s'`. Give this or `cron`.
   */
  every?: Duration
  /** A cron expression (with optional seconds field), parsed by the `cron-parser` package (an optional peer, loaded on first use). */
  cron?: string
  /** Time zone of `cron`, e.g. `'Europe/Berlin'`. Default: the process's. */
  tz?: string
  /** No tick before this instant. Default: now. */
  startAt?: Date | number
  /** Stop after this many ticks. Default: unbounded (until `stop()` or `signal`). */
  maxTicks?: number
  /** Stops the schedule when aborted. */
  signal?: AbortSignal
  /** Receives a tick's error. Default: `process.emitWarning`, so nothing is lost and nothing crashes. */
  onError?: (error: unknown, tick: Tick) => void
}

export interface ScheduleStats {
  /** Ticks whose job was started. */
  readonly ran: number
  /** Ticks skipped because the previous tick's job was still running here (never two at once per schedule). */
  readonly overlapped: number
  /** Ticks whose job threw. */
  readonly failed: number
}

export interface Schedule {
  /** The next tick's instant, `undefined` once stopped. */
  readonly next: Date | undefined
  readonly stats: ScheduleStats
  /** Settles once the schedule has ended (stopped, aborted, maxTicks) and its last job has finished. */
  readonly done: Promise<void>
  /** Stops firing and aborts the running tick's `signal`; resolves once that job has settled. */
  stop(): Promise<void>
}

const OPTION_NAMES = new Set(['every', 'cron', 'tz', 'startAt', 'maxTicks', 'signal', 'onError'])

type NextAfter = (afterMs: number) => number | undefined

/**
 * Runs `job` every N ms or on a cron expression. Timers are unref'd (a schedule never
 * keeps the process alive), at most one job runs at a time per schedule (a tick due
 * while the previous is still running is skipped and counted), and every schedule is
 * bounded by `stop()`, `signal` or `maxTicks`. Pair it with `locks.runOnce` so each tick
 * runs on one instance:
 *
 * ```ts
 * await schedule((tick) => locks.runOnce('nightly-report', report, { lockAtMostFor: '10m', lockAtLeastFor: '30s' }), { cron: '0 3 * * *' })
 * ```
 */
export async function schedule(job: (tick: Tick) => unknown, options: ScheduleOptions): Promise<Schedule> {
  if (typeof job !== 'function') throw new InvalidArgumentError('job', `expected a function, got ${typeof job}`)
  if (options === null || typeof options !== 'object')
    throw new InvalidArgumentError('options', 'expected { every } or { cron }')
  for (const name of Object.keys(options)) {
    if (!OPTION_NAMES.has(name))
      throw new InvalidArgumentError(name, `unknown schedule option (known: ${[...OPTION_NAMES].join(', ')})`)
  }
  if ((options.every === undefined) === (options.cron === undefined))
    throw new InvalidArgumentError('every', 'give exactly one of every and cron')
  const maxTicks = options.maxTicks ?? Number.POSITIVE_INFINITY
  if (maxTicks !== Number.POSITIVE_INFINITY && (!Number.isSafeInteger(maxTicks) || maxTicks < 1))
    throw new InvalidArgumentError('maxTicks', `expected a positive integer, got ${String(maxTicks)}`)
  const startAt = options.startAt === undefined ? Date.now() : Number(options.startAt)
  if (!Number.isFinite(startAt)) throw new InvalidArgumentError('startAt', 'expected a Date or epoch milliseconds')
  if (options.signal !== undefined && !(options.signal instanceof AbortSignal))
    throw new InvalidArgumentError('signal', 'expected an AbortSignal')
  if (options.onError !== undefined && typeof options.onError !== 'function')
    throw new InvalidArgumentError('onError', 'expected a function')
  const nextAfter =
    options.every !== undefined
      ? everyTicks(parseDuration('every', options.every))
      : await cronTicks(options.cron!, options.tz)
  return new RunningSchedule(job, nextAfter, startAt, maxTicks, options.signal, options.onError ?? warn)
}

function everyTicks(everyMs: number): NextAfter {
  return (afterMs) => (Math.floor(afterMs / everyMs) + 1) * everyMs
}

async function cronTicks(expression: string, tz: string | undefined): Promise<NextAfter> {
  if (typeof expression !== 'string' || expression.trim() === '')
    throw new InvalidArgumentError('cron', 'expected a cron expression such as "*/5 * * * *"')
  if (tz !== undefined && typeof tz !== 'string') throw new InvalidArgumentError('tz', 'expected a time zone name')
  let parser: typeof import('cron-parser').CronExpressionParser
  try {
    parser = (await import('cron-parser')).CronExpressionParser
  } catch {
    throw new InvalidArgumentError('cron', 'needs the cron-parser package (npm install cron-parser), or use every')
  }
  const parse = (currentDate: number) => parser.parse(expression, { currentDate, tz, strict: false })
  try {
    parse(Date.now())
  } catch (error) {
    throw new InvalidArgumentError('cron', `cannot parse ${JSON.stringify(expression)}: ${(error as Error).message}`)
  }
  return (afterMs) => {
    try {
      return parse(afterMs).next().getTime()
    } catch {
      return undefined // no further date (an end of range)
    }
  }
}

function warn(error: unknown, tick: Tick): void {
  const failure = error instanceof Error ? (error.stack ?? error.message) : String(error)
  process.emitWarning(`stampede-guard schedule: the job of the tick at ${tick.at.toISOString()} failed: ${failure}`, {
    code: 'SG_SCHEDULE_JOB_FAILED',
  })
}

class RunningSchedule implements Schedule {
  private timer: NodeJS.Timeout | undefined
  private nextMs: number | undefined
  private index = 0
  private running: Promise<void> | undefined
  private readonly controller = new AbortController()
  private finish!: () => void
  readonly done = new Promise<void>((resolve) => (this.finish = resolve))
  private readonly counts = { ran: 0, overlapped: 0, failed: 0 }

  constructor(
    private readonly job: (tick: Tick) => unknown,
    private readonly nextAfter: NextAfter,
    startAt: number,
    private readonly maxTicks: number,
    signal: AbortSignal | undefined,
    private readonly onError: (error: unknown, tick: Tick) => void,
  ) {
    if (signal?.aborted) {
      void this.stop()
      return
    }
    signal?.addEventListener('abort', () => void this.stop(), { once: true })
    this.arm(this.nextAfter(startAt - 1))
  }

  get next(): Date | undefined {
    return this.nextMs === undefined ? undefined : new Date(this.nextMs)
  }

  get stats(): ScheduleStats {
    return { ...this.counts }
  }

  async stop(): Promise<void> {
    clearTimeout(this.timer)
    this.timer = undefined
    this.nextMs = undefined
    this.controller.abort()
    await this.running
    this.finish()
  }

  private arm(atMs: number | undefined): void {
    if (this.controller.signal.aborted) return
    if (atMs === undefined || this.index >= this.maxTicks) {
      this.nextMs = undefined
      if (this.running) void this.running.then(() => this.finish())
      else this.finish()
      return
    }
    this.nextMs = atMs
    // Long waits are chained (Node fires a longer timeout after 1 ms); an early wake re-arms.
    const wait = Math.min(Math.max(0, atMs - Date.now()), MAX_TIMER_MS)
    this.timer = setTimeout(() => (Date.now() < atMs ? this.arm(atMs) : this.fire(atMs)), wait)
    this.timer.unref()
  }

  private fire(atMs: number): void {
    const tick: Tick = { at: new Date(atMs), index: this.index++, signal: this.controller.signal }
    if (this.running) {
      this.counts.overlapped++
    } else {
      this.counts.ran++
      const run = (async () => {
        try {
          await this.job(tick)
        } catch (error) {
          this.counts.failed++
          this.onError(error, tick)
        }
      })()
      const guarded: Promise<void> = run.finally(() => {
        if (this.running === guarded) this.running = undefined
      })
      this.running = guarded
    }
    // the next tick after this one, and never one in the past after a long stall
    this.arm(this.nextAfter(Math.max(atMs, Date.now() - 1)))
  }
}
