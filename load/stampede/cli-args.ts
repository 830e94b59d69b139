/**
 * Command-line options of `npm run load` (and the subset `npm run demo` accepts).
 */
import { parseArgs } from 'node:util'
import { FRAMEWORKS, isFramework, type Framework } from '../frameworks/apps.js'
import { DEFAULT_MODES, isModeName, MODE_NAMES, type ModeName } from './modes.js'
import { isScenarioName, SCENARIO_NAMES, type ScenarioName } from './scenarios.js'

export interface CliOptions {
  scenarios: ScenarioName[]
  /** `--scenario coupons`: the lock scenario (load/stampede/coupons/), run apart from the HTTP ones. */
  coupons: boolean
  /** Who competes in the coupon scenario (default: every registered contender). */
  contenders: string[] | undefined
  modes: ModeName[]
  /** `--framework LIST`: req/s of a route bare and cached, per framework (load/frameworks/), instead of the scenarios. */
  frameworks: Framework[]
  workers: number
  dbLatencyMs: number
  timeScale: number
  repeat: number
  /** Warm-up budget (ms): unmeasured traffic through every mode until req/s settles. */
  warmUpMs: number
  connections: number | undefined
  noPrivateRedis: boolean
  writeFiles: boolean
  markdown: boolean
  help: boolean
}

/** All of them; `outage` is skipped (with a note) when the harness did not start the Redis itself. */
export const DEFAULT_SCENARIOS: ScenarioName[] = [...SCENARIO_NAMES]

export const USAGE = `Usage: npm run load -- [options]

  --scenario LIST     comma-separated: ${SCENARIO_NAMES.join(', ')}, or all
                      (default: ${DEFAULT_SCENARIOS.join(',')}); or coupons: the
                      distributed-lock scenario (1,000 coupons, 1,200 users, 4 processes,
                      PostgreSQL at DATABASE_URL, default 127.0.0.1:5432/test)
  --contenders LIST   coupons only: which locks compete (default: all registered)
  --framework LIST    comma-separated: ${FRAMEWORKS.join(', ')}, or all: requests per
                      second and server CPU per request of one route bare and behind
                      that framework's adapter (cached), instead of the scenarios
                      (--time-scale scales its 5 s runs, --connections its 50
                      connections, --repeat N gives N rounds instead of 2)
  --modes LIST        comma-separated: ${MODE_NAMES.join(', ')} (default: ${DEFAULT_MODES.join(', ')})
  --workers N         app worker processes (default: 4)
  --db-latency MS     latency of one database query (default: 50)
  --time-scale X      multiply every scenario's duration (default: 1; 0.5 = half as long)
  --repeat N          run the modes N times, interleaved and each round starting one mode later (default: 1)
  --warm-up S         unmeasured zipf traffic through every mode first, 2 s each per pass, until a
                      pass's req/s is within 10 % of the last, or the next pass would end after S seconds
                      (the first always runs; default: 30; 0 = none)
  --connections N     override every scenario's number of connections
  --no-private-redis  never start a redis-server (in-process mode unless REDIS_URL is set)
  --no-files          do not write load/results/<timestamp>.json and the SVG charts
  --markdown          also print every table as Markdown at the end (for the README)
  -h, --help          this text

Environment:
  REDIS_URL           use this Redis instead of a private redis-server
  DATABASE_URL        use this PostgreSQL (the harness creates and seeds its own table)
                      instead of the built-in slow source
`

function list<T extends string>(raw: string, valid: readonly T[], is: (v: string) => v is T, what: string): T[] {
  if (raw === 'all') return [...valid]
  const items = raw
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
  for (const item of items)
    if (!is(item)) throw new Error(`unknown ${what} '${item}' (expected one of: ${valid.join(', ')})`)
  if (items.length === 0) throw new Error(`no ${what} given`)
  return items as T[]
}

function positive(raw: string, name: string, allowZero = false): number {
  const n = Number(raw)
  if (!Number.isFinite(n) || n < 0 || (!allowZero && n === 0))
    throw new Error(`--${name} must be a ${allowZero ? 'non-negative' : 'positive'} number, got '${raw}'`)
  return n
}

/** A whole number ≥ 1: `Math.round` of a positive number let `--repeat 0.4` mean zero rounds, i.e. no runs. */
function count(raw: string, name: string): number {
  const n = Number(raw)
  if (!Number.isInteger(n) || n < 1) throw new Error(`--${name} must be a whole number ≥ 1, got '${raw}'`)
  return n
}

export function parseCliArgs(argv: string[]): CliOptions {
  const { values } = parseArgs({
    args: argv,
    options: {
      scenario: { type: 'string' },
      scenarios: { type: 'string' },
      contenders: { type: 'string' },
      framework: { type: 'string' },
      frameworks: { type: 'string' },
      modes: { type: 'string' },
      mode: { type: 'string' },
      workers: { type: 'string' },
      'db-latency': { type: 'string' },
      'time-scale': { type: 'string' },
      repeat: { type: 'string' },
      'warm-up': { type: 'string' },
      connections: { type: 'string' },
      'no-private-redis': { type: 'boolean' },
      'no-files': { type: 'boolean' },
      markdown: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
    strict: true,
  })
  const requested = (values.scenario ?? values.scenarios)?.split(',').map((name) => name.trim())
  const coupons = requested?.includes('coupons') ?? false
  const httpScenarios = requested?.filter((name) => name !== 'coupons')
  const scenarioArg = httpScenarios?.join(',')
  const modeArg = values.modes ?? values.mode
  const frameworkArg = values.framework ?? values.frameworks
  // Keep the modes in the canonical order whatever order they were given in: the table reads none → full.
  const modes = modeArg ? list(modeArg, MODE_NAMES, isModeName, 'mode') : [...DEFAULT_MODES]
  return {
    scenarios: scenarioArg
      ? list(scenarioArg, SCENARIO_NAMES, isScenarioName, 'scenario')
      : coupons
        ? []
        : DEFAULT_SCENARIOS,
    coupons,
    contenders: values.contenders
      ?.split(',')
      .map((name) => name.trim())
      .filter(Boolean),
    modes: MODE_NAMES.filter((m) => modes.includes(m)),
    frameworks: frameworkArg ? list(frameworkArg, FRAMEWORKS, isFramework, 'framework') : [],
    workers: values.workers ? count(values.workers, 'workers') : 4,
    dbLatencyMs: values['db-latency'] ? positive(values['db-latency'], 'db-latency', true) : 50,
    timeScale: values['time-scale'] ? positive(values['time-scale'], 'time-scale') : 1,
    repeat: values.repeat ? count(values.repeat, 'repeat') : 1,
    warmUpMs: values['warm-up'] ? positive(values['warm-up'], 'warm-up', true) * 1000 : 30_000,
    connections: values.connections ? count(values.connections, 'connections') : undefined,
    noPrivateRedis: values['no-private-redis'] ?? false,
    writeFiles: !(values['no-files'] ?? false),
    markdown: values.markdown ?? false,
    help: values.help ?? false,
  }
}
