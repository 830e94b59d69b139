/**
 * An election candidate in its own process, for the cross-process election tests. It
 * campaigns with `onElected` (the candidacy goes on term after term) and, while it leads,
 * writes its term to the fenced resource every 20 ms, each write right after a `leading`
 * check. It can be SIGKILLed or SIGSTOPped like any app instance.
 *
 * env: LOCK_BACKEND=redis|etcd|zookeeper; REDIS_URL (the redis backend's store), ETCD_HOSTS
 * (comma-separated), ZK_CONNECT and ZK_SESSION_MS; CHECK_URL: the redis-server holding
 * the fenced resource; CANDIDATE_ID.
 */
import { Etcd3 } from 'etcd3'
import { Redis } from 'ioredis'
import { createLocks, type Leadership, type Locks } from '../../../src/lock/index.js'
import { serveRequests } from '../../support/worker-side.js'
import { connectZooKeeper } from '../../support/zookeeper.js'
import { FENCE_KEY, FENCE_LUA } from './fenced-resource.js'

export type CandidateRequest = { op: 'campaign'; name: string; lease: number } | { op: 'status' } | { op: 'resign' }

export interface TermRecord {
  term: string
  electedAt: number
  /** Date.now() when this process learnt the term ended (its signal aborted, or `leading` said no). */
  endedAt?: number
  reason?: string
}

export interface CandidateStatus {
  id: string
  leading: boolean
  terms: TermRecord[]
  /** Writes refused by the fence (its term was older than the newest). */
  refused: number
  /** `leading` checks that said no while the signal had not aborted yet (the clock noticed first). */
  clockStepDowns: number
  sessionExpired: boolean
}

const backend = process.env.LOCK_BACKEND
const id = process.env.CANDIDATE_ID ?? `candidate-${process.pid}`
const commandTimeout = Number(process.env.COMMAND_TIMEOUT_MS ?? 1_000)
let sessionExpired = false

/** The campaign asked for, so a ZooKeeper candidate whose session expired campaigns again on a new client. */
let campaign: { name: string; lease: number } | undefined

async function connect(): Promise<Locks<unknown>> {
  if (backend === 'redis') return createLocks({ redis: new Redis(process.env.REDIS_URL!), commandTimeout })
  if (backend === 'etcd')
    return createLocks<unknown>({ etcd: new Etcd3({ hosts: process.env.ETCD_HOSTS!.split(',') }), commandTimeout })
  if (backend === 'zookeeper') {
    const client = await connectZooKeeper(process.env.ZK_CONNECT!, {
      sessionTimeout: Number(process.env.ZK_SESSION_MS ?? 2_000),
    })
    client.once('expired', () => {
      // An expired client is dead ("create a new client"): as an app would, start over on a new one.
      sessionExpired = true
      const old = locks
      void old.close().finally(() => client.close())
      void connect().then((fresh) => {
        locks = fresh
        if (campaign) startCampaign(campaign.name, campaign.lease)
      })
    })
    return createLocks<unknown>({ zookeeper: client, commandTimeout })
  }
  throw new Error(`LOCK_BACKEND must be redis, etcd or zookeeper, got ${backend}`)
}

let locks = await connect()
const check = new Redis(process.env.CHECK_URL!)
check.defineCommand('fence', { numberOfKeys: 1, lua: FENCE_LUA })
const fence = (term: bigint, checkedAt: number) =>
  (check as unknown as { fence(...args: unknown[]): Promise<number> }).fence(FENCE_KEY, term.toString(), id, checkedAt)

const terms: TermRecord[] = []
let current: Leadership | undefined
let refused = 0
let clockStepDowns = 0
const candidacy = new AbortController()

/** The leader's work: write the term every 20 ms while `leading`, until the term ends. */
async function lead(leadership: Leadership): Promise<void> {
  current = leadership
  const record: TermRecord = { term: leadership.term.toString(), electedAt: Date.now() }
  terms.push(record)
  const ended = () => {
    record.endedAt ??= Date.now()
    record.reason ??= (leadership.signal.reason as Error | undefined)?.message
  }
  leadership.signal.addEventListener('abort', ended, { once: true })
  try {
    for (;;) {
      const abortedBefore = leadership.signal.aborted
      const checkedAt = Date.now()
      if (!leadership.leading) {
        if (!abortedBefore) clockStepDowns++
        ended()
        return
      }
      if ((await fence(leadership.term, checkedAt).catch(() => 1)) === 0) refused++
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
  } finally {
    if (current === leadership) current = undefined
  }
}

function startCampaign(name: string, lease: number): void {
  void locks.elect(name, { id, lease, signal: candidacy.signal, onElected: lead }).catch(() => {})
}

async function handle(request: CandidateRequest): Promise<unknown> {
  switch (request.op) {
    case 'campaign': {
      campaign = { name: request.name, lease: request.lease }
      startCampaign(request.name, request.lease)
      return true
    }
    case 'status':
      // After a SIGCONT this message can be read before the overdue timers run: let one timers phase pass.
      await new Promise((resolve) => setTimeout(resolve, 0))
      return {
        id,
        leading: current?.leading ?? false,
        terms,
        refused,
        clockStepDowns,
        sessionExpired,
      } satisfies CandidateStatus
    case 'resign':
      await current?.resign()
      return true
  }
}

serveRequests(handle)
