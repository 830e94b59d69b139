/**
 * `npx tsx load/stampede/profile-summary.ts <dir> [--from S] [--top N]`: the self time of the
 * V8 CPU profiles that `LOAD_CPU_PROF=<dir> npm run load …` wrote, summed over the workers,
 * by function and by file or package, from S seconds into each profile (default 3: the module
 * loading before the traffic left out). Profiles of the loader-hooks thread are skipped.
 *
 * V8 samples by wall clock: on a machine shared with other work, time the worker spent
 * descheduled lands on whatever ran when it was (mostly the socket writes), so absolute
 * figures vary from run to run with the machine's load. What compares across runs and modes is
 * each part's share of the same per-request work: the last line divides by the self time of
 * Express and its router, which every request pays once whatever the mode.
 */
import fs from 'node:fs'
import path from 'node:path'

interface ProfileNode {
  id: number
  callFrame: { functionName: string; url: string; lineNumber: number }
}
interface Profile {
  nodes: ProfileNode[]
  samples: number[]
  timeDeltas: number[]
}

const args = process.argv.slice(2)
const option = (name: string, fallback: number) => {
  const at = args.indexOf(name)
  return at >= 0 ? Number(args.splice(at, 2)[1]) : fallback
}
const fromUs = option('--from', 3) * 1e6
const top = option('--top', 40)
const dir = args[0]
if (!dir) throw new Error('usage: profile-summary.ts <dir> [--from seconds] [--top n]')

/** `node_modules/ioredis/…` → `node_modules/ioredis`; `src/cache/x.ts` stays; Node's own → `node`. */
function groupOf(url: string, functionName: string): string {
  if (url.includes('node_modules/')) {
    const parts = url.slice(url.lastIndexOf('node_modules/')).split('/')
    return parts.slice(0, parts[1]!.startsWith('@') ? 3 : 2).join('/')
  }
  const inRepo = /\/(src|load|test)\/.*$/.exec(url)
  if (inRepo) return inRepo[0].slice(1)
  return url === '' && functionName.startsWith('(') ? functionName : 'node'
}

const byFunction = new Map<string, number>()
const byGroup = new Map<string, number>()
let total = 0
const files = fs.readdirSync(dir).filter((f) => f.endsWith('.cpuprofile') && !/\.1\.\d+\.cpuprofile$/.test(f))
for (const file of files) {
  const profile = JSON.parse(fs.readFileSync(path.join(dir, file), 'utf8')) as Profile
  const nodes = new Map(profile.nodes.map((node) => [node.id, node]))
  let at = 0
  profile.samples.forEach((id, i) => {
    const spent = profile.timeDeltas[i] ?? 0
    at += spent
    const { functionName, url, lineNumber } = nodes.get(id)!.callFrame
    if (at < fromUs || functionName === '(idle)' || functionName === '(program)') return
    const group = groupOf(url, functionName)
    const name = `${functionName || '(anonymous)'}  ${group}:${lineNumber + 1}`
    byFunction.set(name, (byFunction.get(name) ?? 0) + spent)
    byGroup.set(group, (byGroup.get(group) ?? 0) + spent)
    total += spent
  })
}
const row = (us: number, label: string) =>
  `${((100 * us) / total).toFixed(1).padStart(5)} % ${(us / 1000).toFixed(0).padStart(7)} ms  ${label}`
const sorted = (map: Map<string, number>) => [...map].sort((a, b) => b[1] - a[1]).slice(0, top)
console.log(`${files.length} worker profiles, ${(total / 1000).toFixed(0)} ms sampled from ${fromUs / 1e6} s on`)
for (const [name, us] of sorted(byFunction)) console.log(row(us, name))
console.log('by file or package:')
for (const [name, us] of sorted(byGroup)) console.log(row(us, name))
const perRequest = (byGroup.get('node_modules/express') ?? 0) + (byGroup.get('node_modules/router') ?? 0)
const share = (prefix: string) =>
  [...byGroup].filter(([name]) => name.startsWith(prefix)).reduce((sum, [, us]) => sum + us, 0) / perRequest
console.log(
  `per Express+router unit: all ${(total / perRequest).toFixed(2)}, src/ ${share('src/').toFixed(2)}, ` +
    `ioredis ${share('node_modules/ioredis').toFixed(2)}, GC ${share('(garbage collector)').toFixed(2)}`,
)
