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
  /** ZooKeeper clients replaced after a reconnect that never completed. */
  clientsReplaced: number
  /** Store failures reported while campaigning or leading (`backend-error` events), and the last one. */
  backendErrors: number
  lastBackendError?: string
}

const backend = process.env.LOCK_BACKEND
const id = process.env.CANDIDATE_ID ?? `candidate-${process.pid}`
const commandTimeout = Number(process.env.COMMAND_TIMEOUT_MS ?? 1_000)
let sessionExpired = false
let backendErrors = 0
/** ZooKeeper clients given up on while disconnected too long (see `connect`). */
let clientsReplaced = 0
let lastBackendError: string | undefined

/** The campaign asked for, so a ZooKeeper candidate whose session expired campaigns again on a new client. */
let campaign: { name: string; lease: number } | undefined

/** Counts the store failures `locks` reports, for the status (a test that fails says what the candidates met). */
function watched<L extends Locks<unknown>>(locks: L): L {
  locks.on('backend-error', (event) => {
    backendErrors++
    lastBackendError = `${event.operation}: ${(event.error as Error)?.message ?? String(event.error)}`
  })
  return locks
}

/** Once per dead ZooKeeper client: closes it and campaigns again on a new one (connecting retried until it works). */
const replaced = new WeakSet<object>()
function startOver(client: { close(): void }, note: () => void): void {
  if (replaced.has(client)) return
  replaced.add(client)
  note()
  const old = locks
  void old.close().finally(() => client.close())
  const attempt = (): Promise<void> =>
    connect().then(
      (fresh) => {
        locks = fresh
        if (campaign) startCampaign(campaign.name, campaign.lease)
      },
      () => new Promise((resolve) => setTimeout(resolve, 500)).then(attempt),
    )
  void attempt()
}

async function connect(): Promise<Locks<unknown>> {
  if (backend === 'redis') return watched(createLocks({ redis: new Redis(process.env.REDIS_URL!), commandTimeout }))
  if (backend === 'etcd')
    return watched(
      createLocks<unknown>({ etcd: new Etcd3({ hosts: process.env.ETCD_HOSTS!.split(',') }), commandTimeout }),
    )
  if (backend === 'zookeeper') {
    const sessionMs = Number(process.env.ZK_SESSION_MS ?? 2_000)
    const client = await connectZooKeeper(process.env.ZK_CONNECT!, { sessionTimeout: sessionMs })
    // An expired client is dead ("create a new client"): as an app would, start over on a new one.
    client.once('expired', () => startOver(client, () => (sessionExpired = true)))
    // node-zookeeper-client stops its connect timeout once TCP connects, so a client that
    // reached a restarting server before it served waits for its handshake reply forever
    // (alexguan/node-zookeeper-client#57), never told of its expiry. Disconnected for three
    // session timeouts (its session is gone on the server by then): start over as well.
    let stuck: NodeJS.Timeout | undefined
    client.on('disconnected', () => {
      clearTimeout(stuck)
      stuck = setTimeout(() => startOver(client, () => clientsReplaced++), 3 * sessionMs)
    })
    client.on('connected', () => clearTimeout(stuck))
    client.once('expired', () => clearTimeout(stuck))
    return watched(createLocks<unknown>({ zookeeper: client, commandTimeout }))
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
        clientsReplaced,
        backendErrors,
        lastBackendError,
      } satisfies CandidateStatus
    case 'resign':
      await current?.resign()
      return true
  }
}

serveRequests(handle)
