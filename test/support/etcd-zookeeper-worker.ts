/**
 * A child process holding etcd or ZooKeeper locks for the cross-process tests
 * (test/lock/etcd/, test/lock/zookeeper/). It uses the public front,
 * `createLocks({ etcd })` / `createLocks({ zookeeper })`, on a client of its own.
 *
 * env: LOCK_BACKEND=etcd|zookeeper; ETCD_HOSTS (comma-separated URLs) or ZK_CONNECT
 * (`host:port,…`) and ZK_SESSION_MS; optional REDIS_URL (the occupancy counter of
 * `contend`). The coupon contest runs on test/support/coupons/ with each backend folder's coupons-factory.ts.
 *
 * Requests (see `handle`): hold / status / fencedWrite / release / contend.
 */
import { Etcd3 } from 'etcd3'
import { Redis } from 'ioredis'
import { createLocks, type HeldLockHandle, type Locks } from '../../src/lock/index.js'
import type { EtcdFencedWrites, ZooKeeperFencedWrites } from '../../src/lock/index.js'
import { serveRequests } from './worker-side.js'
import { connectZooKeeper } from './zookeeper.js'

type Resource = EtcdFencedWrites | ZooKeeperFencedWrites
type Request =
  | { op: 'hold'; key: string; lease: number; wait: number }
  | { op: 'status' }
  | { op: 'fencedWrite'; key: string; value: string }
  | { op: 'release' }
  | { op: 'contend'; key: string; rounds: number; lease: number; wait: number }

const backend = process.env.LOCK_BACKEND
/** ZooKeeper: the client was told its session expired. */
let sessionExpired = false
const commandTimeout = Number(process.env.COMMAND_TIMEOUT_MS ?? 1_000)

async function connect(): Promise<{ locks: Locks<Resource>; close(): void }> {
  if (backend === 'etcd') {
    const client = new Etcd3({ hosts: process.env.ETCD_HOSTS!.split(',') })
    return { locks: createLocks<Resource>({ etcd: client, commandTimeout }), close: () => client.close() }
  }
  if (backend === 'zookeeper') {
    const client = await connectZooKeeper(process.env.ZK_CONNECT!, {
      sessionTimeout: Number(process.env.ZK_SESSION_MS ?? 2_000),
    })
    client.once('expired', () => (sessionExpired = true))
    return { locks: createLocks<Resource>({ zookeeper: client, commandTimeout }), close: () => client.close() }
  }
  throw new Error(`LOCK_BACKEND must be etcd or zookeeper, got ${backend}`)
}

const { locks } = await connect()
const redis = process.env.REDIS_URL ? new Redis(process.env.REDIS_URL) : undefined

let held: HeldLockHandle<Resource> | undefined
let lostAt: number | undefined

async function handle(request: Request): Promise<unknown> {
  switch (request.op) {
    case 'hold': {
      held = await locks.acquire(request.key, { lease: request.lease, wait: request.wait })
      lostAt = undefined
      held.signal.addEventListener('abort', () => (lostAt = Date.now()), { once: true })
      return { token: held.token.toString() }
    }
    case 'status':
      // After a SIGCONT this message can be read before the overdue timers run (I/O
      // callbacks come first in that loop turn): let one timers phase pass, as any code
      // of the holder's would see it.
      await new Promise((resolve) => setTimeout(resolve, 0))
      return {
        aborted: held?.signal.aborted ?? false,
        reason: (held?.signal.reason as Error | undefined)?.name,
        lostAt,
        sessionExpired,
      }
    case 'fencedWrite': {
      const resource = held!.resource
      if ('put' in resource) return resource.put(request.key, request.value)
      return resource.setData(request.key, Buffer.from(request.value))
    }
    case 'release':
      await held?.release()
      held = undefined
      return true
    case 'contend':
      return contend(request)
  }
}

/**
 * `rounds` critical sections on one key. Inside each, INCR of a Redis counter must answer
 * 1 (no one else inside); it is DECRed on the way out, and `rounds` counts the sections. Failed attempts are counted by
 * error code, not thrown: the cluster tests kill members meanwhile.
 */
async function contend(request: Extract<Request, { op: 'contend' }>) {
  const tokens: string[] = []
  const errors: Record<string, number> = {}
  let overlaps = 0
  for (let round = 0; round < request.rounds; round++) {
    try {
      await locks.withLock(
        request.key,
        async ({ token, signal }) => {
          const inside = await redis!.incr('inside')
          if (inside !== 1) overlaps++
          await new Promise((resolve) => setTimeout(resolve, 5))
          await redis!.decr('inside')
          await redis!.incr('rounds')
          if (!signal.aborted) tokens.push(token.toString())
        },
        { lease: request.lease, wait: request.wait },
      )
    } catch (err) {
      const code = (err as { code?: string }).code ?? (err as Error).name
      errors[code] = (errors[code] ?? 0) + 1
    }
  }
  return { tokens, errors, overlaps }
}

serveRequests(handle)
