/** Candidate processes for the cross-process election tests (candidate-worker.ts), and the checks they share. */
import type { Redis } from 'ioredis'
import { expect } from 'vitest'
import type { Leader, LeaderObserver } from '../../../src/lock/index.js'
import { until } from '../../support/timing.js'
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
  await until(
    async () => {
      const statuses = await Promise.all(candidates.map((c) => c.status()))
      const leading = statuses.filter((status) => status.leading)
      leaders = candidates.filter((_, i) => statuses[i]!.leading)
      // The observer reports that candidate, with the term it was told.
      return (
        leading.length === 1 &&
        observer.leader?.id === leading[0]!.id &&
        observer.leader.term.toString() === leading[0]!.terms.at(-1)?.term
      )
    },
    'exactly one candidate leading, as observed',
    timeoutMs,
  )
  return leaders[0]!
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
  const paused = candidates.find((c) => c.id === first.id)!
  paused.worker.kill('SIGSTOP')
  let second: Leader
  try {
    second = await nextLeader(observer, first)
    await until(async () => (await readFence(check)).terms === 2, 'the new term to write')
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
