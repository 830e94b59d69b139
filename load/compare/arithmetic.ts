/**
 * The comparison's pure arithmetic, apart from the peers so that the root test suite can
 * check it without load/compare/node_modules: quantiles, the lock hand-off, and the Redis
 * cost per call from INFO commandstats.
 */

export function quantile(values: number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN
}

/** One hold of the contended lock: which process, when it asked, got it, and started releasing. */
export interface Hold {
  process: number
  askedAt: number
  acquiredAt: number
  releasedAt: number
}

/**
 * For every release while another process was waiting (it asked before the release and
 * got the lock after it): the time until the first of those waiters has the lock. The
 * releaser re-taking the lock in between does not end their wait, which is how a polling
 * lock starves its waiters. `overlaps`: holds that began before the previous one ended.
 */
export function handoffs(holds: Hold[]): { handoffMs: number[]; overlaps: number } {
  const sorted = [...holds].sort((a, b) => a.acquiredAt - b.acquiredAt)
  let overlaps = 0
  for (let i = 1; i < sorted.length; i++) if (sorted[i]!.acquiredAt < sorted[i - 1]!.releasedAt) overlaps++
  const handoffMs: number[] = []
  for (const release of sorted) {
    const served = sorted.find(
      (h) => h.process !== release.process && h.askedAt < release.releasedAt && h.acquiredAt >= release.releasedAt,
    )
    if (served) handoffMs.push(served.acquiredAt - release.releasedAt)
  }
  return { handoffMs, overlaps }
}

/**
 * Redis usec per call and the commands per call, from INFO commandstats after RESETSTAT
 * and `runs` calls. The harness's own commands (CONFIG, INFO, …) are left out. Commands a
 * script calls are listed too, but the script's usec already includes them: with a script
 * among the commands, only scripts are summed and the others are named in parentheses.
 */
export function commandStats(info: string, runs: number): { usec: number; commands: string } {
  const isScript = (name: string) => name.startsWith('eval') || name.startsWith('fcall')
  const sent: { name: string; calls: number; usec: number }[] = []
  for (const line of info.split('\n')) {
    const match = /^cmdstat_([\w|]+):calls=(\d+),usec=(\d+)/.exec(line.trim())
    if (!match || /^(config|info|ping|client|select|hello)\b/.test(match[1]!)) continue
    sent.push({ name: match[1]!, calls: Number(match[2]), usec: Number(match[3]) })
  }
  const scripted = sent.some((c) => isScript(c.name))
  let usec = 0
  const top: string[] = []
  const inner: string[] = []
  for (const c of sent) {
    const label = `${c.name} ×${(c.calls / runs).toFixed(2)}`
    if (scripted && !isScript(c.name)) {
      inner.push(label)
      continue
    }
    usec += c.usec
    top.push(label)
  }
  return { usec: usec / runs, commands: top.join(' + ') + (inner.length ? ` (+ ${inner.join(' + ')})` : '') }
}

/** The item whose `value` is the median (the lower middle for an even count): a peer's median round. */
export function lowerMedianBy<T>(items: readonly T[], value: (item: T) => number): T {
  if (items.length === 0) throw new Error('lowerMedianBy: no items')
  const sorted = [...items].sort((a, b) => value(a) - value(b))
  return sorted[Math.floor((sorted.length - 1) / 2)]!
}
