/** Candidate processes for the cross-process election tests (candidate-worker.ts), and the checks they share. */
import type { Redis } from 'ioredis'
import { expect } from 'vitest'
import type { Leader, LeaderObserver } from '../../../src/lock/index.js'
import { sleep, until } from '../../support/timing.js'
import { forkWorker, type Worker } from '../../support/workers.js'
import type { CandidateStatus } from './candidate-worker.js'
import { readFence, type FenceState } from './fenced-resource.js'

const WORKER = new URL('./candidate-worker.ts', import.meta.url)

export interface Candidate {
  readonly id: string
  readonly worker: Worker
  status(): Promise<CandidateStatus>
}

/** Forks a candidate with `env` (the backend's) and starts its campaign on `name`. */
export async function startCandidate(
  id: string,
  env: Record<string, string>,
  name: string,
  lease: number,
): Promise<Candidate> {
  const worker = await forkWorker(WORKER, { env: { ...env, CANDIDATE_ID: id } })
  await worker.request({ op: 'campaign', name, lease })
  return { id, worker, status: () => worker.request<CandidateStatus>({ op: 'status' }) }
}

/** Waits (bounded) until the observer reports a leader other than `previous`, with a higher term. */
export async function nextLeader(observer: LeaderObserver, previous?: Leader, timeoutMs = 20_000): Promise<Leader> {
  await until(
    () => {
      const leader = observer.leader
      return leader !== undefined && (previous === undefined || leader.term > previous.term)
    },
    `a leader after term ${previous?.term ?? 'none'}`,
    timeoutMs,
  )
  return observer.leader!
}

/** Exactly one of `candidates` says it leads, and it is the one the observer reports (bounded wait for them to agree). */
export async function exactlyOneLeader(
  candidates: Candidate[],
  observer: LeaderObserver,
  timeoutMs = 20_000,
): Promise<Candidate> {
  let leaders: Candidate[] = []
  let seen = 'nothing read yet'
  // Samples by how many candidates said they led: a failure says whether it saw none or several.
  const samples = { none: 0, one: 0, oneNotObserved: 0, several: 0 }
  await until(
    async () => {
      const statuses = await Promise.all(candidates.map((c) => c.status()))
      const leading = statuses.filter((status) => status.leading)
      leaders = candidates.filter((_, i) => statuses[i]!.leading)
      seen = describeLeaders(statuses, observer.leader)
      // The observer reports that candidate, with the term it was told.
      const agreed =
        leading.length === 1 &&
        observer.leader?.id === leading[0]!.id &&
        observer.leader.term.toString() === leading[0]!.terms.at(-1)?.term
      if (leading.length === 0) samples.none++
      else if (leading.length > 1) samples.several++
      else if (agreed) samples.one++
      else samples.oneNotObserved++
      return agreed
    },
    'exactly one candidate leading, as observed',
    timeoutMs,
  ).catch((error: Error) => {
    throw new Error(
      `${error.message} (samples: ${samples.none} with no candidate leading, ${samples.several} with several, ${samples.oneNotObserved} with one the observer did not report); last seen: ${seen}`,
    )
  })
  return leaders[0]!
}

/** What a failed wait saw: how many candidates said they led (and which terms), and what the observer reported. */
function describeLeaders(statuses: CandidateStatus[], observed: Leader | undefined): string {
  const leading = statuses.filter((s) => s.leading).map((s) => `${s.id} (term ${s.terms.at(-1)?.term})`)
  const expired = statuses.filter((s) => s.sessionExpired || s.clientsReplaced > 0).map((s) => s.id)
  const observedText = observed ? `${observed.id} (term ${observed.term})` : 'nobody'
  const errors = statuses.map(
    (s) => `${s.id}: ${s.backendErrors}${s.lastBackendError ? ` (last: ${s.lastBackendError})` : ''}`,
  )
  return `${leading.length} candidates leading [${leading.join(', ')}], the observer reports ${observedText}; sessions expired or clients replaced: [${expired.join(', ')}]; store errors: [${errors.join('; ')}]`
}

/** The fence saw no two leaders at once, every term wrote, and terms only grew. */
export function expectNoOverlap(fence: FenceState): void {
  expect(fence.overlaps).toBe(0)
  const terms = fence.log.map((line) => BigInt(line.split(' ')[0]!))
  expect([...terms].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))).toEqual(terms)
  expect(new Set(terms).size).toBe(terms.length)
}

/**
 * The leader (one of `candidates`) is SIGSTOPped until the observer reports a new leader
 * and that term has written to the fence, then resumed. Returns both leaders and what the
 * resumed one says of itself; the caller checks its own backend's details.
 */
export async function pauseTheLeader(
  candidates: Candidate[],
  observer: LeaderObserver,
  check: Redis,
): Promise<{ first: Leader; second: Leader; status: CandidateStatus }> {
  const first = await nextLeader(observer)
  // The observer can see a leader before that candidate has learnt it and written: stopping it
  // then would leave the fence with no first term (a CI run on a loaded machine did just that).
  await until(async () => (await readFence(check)).term === first.term.toString(), 'the first term to write', 30_000)
  const paused = candidates.find((c) => c.id === first.id)!
  paused.worker.kill('SIGSTOP')
  let second: Leader
  try {
    second = await nextLeader(observer, first)
    // Bounded for a loaded CI machine (the new leader learns it from a watch event, then writes);
    // a failure says what each running candidate believed, not only what the fence saw.
    await until(async () => (await readFence(check)).terms >= 2, 'the new term to write', 30_000).catch(
      async (error: Error) => {
        const running = candidates.filter((c) => c !== paused)
        const statuses = await Promise.all(running.map((c) => c.status()))
        throw new Error(
          `${error.message}; fence: ${JSON.stringify(await readFence(check))}; ${describeLeaders(statuses, observer.leader)}`,
        )
      },
    )
  } finally {
    paused.worker.kill('SIGCONT')
  }
  expect(second.id).not.toBe(first.id)
  expect(second.term).toBeGreaterThan(first.term)
  const status = await paused.status()
  expect(status.leading).toBe(false)
  expect(status.refused).toBe(0) // it never wrote after the new term began: its first check said no
  expect(status.terms.find((t) => t.term === first.term.toString())?.endedAt).toBeDefined()
  const fence = await readFence(check)
  expectNoOverlap(fence)
  expect(fence.fenced).toBe(0)
  return { first, second, status }
}

/** Leaders SIGKILLed one after another (by `killLeadersEvery`), and what the fence counted. */
export interface KillLoopResult {
  /** `term id` of each leader killed, in order. */
  killed: string[]
  survivor: Candidate
  fence: FenceState
}

/**
 * 5 candidates in 5 processes; every `intervalMs` the leader (as observed) is SIGKILLed and
 * a replacement forked, `rounds` times; each kill waits (bounded) for the next leader, with
 * a higher term. Then exactly one of the living leads, and the fence saw no two leaders at
 * once and only growing terms. `candidates` collects every process started, for the
 * caller's clean-up.
 */
export async function killLeadersEvery(options: {
  spawn: (id: string) => Promise<Candidate>
  observer: LeaderObserver
  check: Redis
  rounds: number
  intervalMs: number
  candidates: Candidate[]
  /** Bound on each wait for the next leader (the store's failover after a kill). */
  failoverMs?: number
}): Promise<KillLoopResult> {
  const { observer, candidates } = options
  let next = 0
  const spawn = () => options.spawn(`c${++next}`)
  const killed: string[] = []
  candidates.push(...(await Promise.all(Array.from({ length: 5 }, spawn))))
  let leader = await nextLeader(observer, undefined, options.failoverMs)
  // Replacements start while the next round runs (forking is slow on a loaded machine).
  const replacements: Promise<Candidate>[] = []
  for (let round = 0; round < options.rounds; round++) {
    await sleep(options.intervalMs)
    candidates.push(...(await Promise.all(replacements.splice(0))))
    leader = observer.leader!
    const victim = candidates.find((c) => c.id === leader.id)!
    victim.worker.kill('SIGKILL')
    killed.push(`${leader.term} ${leader.id}`)
    candidates.splice(candidates.indexOf(victim), 1)
    replacements.push(spawn())
    leader = await nextLeader(observer, leader, options.failoverMs)
  }
  candidates.push(...(await Promise.all(replacements)))
  const survivor = await exactlyOneLeader(candidates, observer, options.failoverMs)
  const fence = await readFence(options.check)
  expectNoOverlap(fence)
  const killedTerms = killed.map((entry) => BigInt(entry.split(' ')[0]!))
  expect(killedTerms.every((term, i) => i === 0 || term > killedTerms[i - 1]!)).toBe(true)
  expect(fence.terms).toBeGreaterThanOrEqual(options.rounds + 1)
  expect(BigInt(fence.term)).toBe(observer.leader!.term)
  return { killed, survivor, fence }
}

/** The log line of a kill loop: leaders killed, the highest term, and the fence's counts. */
export function describeKillLoop(label: string, { killed, survivor, fence }: KillLoopResult): string {
  return `[${label}] ${killed.length} leaders killed (${killed.join(', ')}); highest term ${fence.term} (${survivor.id}); terms that wrote ${fence.terms}, writes ${fence.writes}, fenced late writes ${fence.fenced}, overlaps ${fence.overlaps}`
}

/** Leaders the kill-loop tests SIGKILL (`ELECTION_KILL_ROUNDS`, default 5). */
export const KILL_ROUNDS = Number(process.env.ELECTION_KILL_ROUNDS ?? 5)

/**
 * The kill-loop test, as every backend runs it: an observer on `name`, a leader SIGKILLed
 * every 2 s for KILL_ROUNDS rounds (killLeadersEvery's checks), the result logged under `label`.
 */
export async function runKillLoop(options: {
  label: string
  name: string
  observe: (name: string) => LeaderObserver
  spawn: (id: string, name: string) => Promise<Candidate>
  check: Redis
  candidates: Candidate[]
}): Promise<void> {
  const { name, check, candidates } = options
  const observer = options.observe(name)
  try {
    const spawn = (id: string) => options.spawn(id, name)
    const result = await killLeadersEvery({
      spawn,
      observer,
      check,
      rounds: KILL_ROUNDS,
      intervalMs: 2_000,
      candidates,
    })
    console.log(describeKillLoop(options.label, result))
  } finally {
    await observer.close()
  }
}
