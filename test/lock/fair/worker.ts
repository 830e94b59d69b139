/**
 * A fair-lock user in its own process (test/lock/fair/fair.cross-process.test.ts). env
 * FAIR_WORKER = JSON { port, fair }.
 */
import { Redis } from 'ioredis'
import { createLocks, type HeldLockHandle } from '../../../src/index.js'
import { serveRequests } from '../../support/worker-side.js'

export type FairWorkerRequest =
  { op: 'acquire'; key: string; lease: number; wait: number } | { op: 'release'; key: string }

const config = JSON.parse(process.env.FAIR_WORKER ?? '{}') as { port: number; fair: boolean }
const locks = createLocks({
  redis: new Redis({ host: '127.0.0.1', port: config.port }),
  namespace: 'fair',
  fair: config.fair,
})
const held = new Map<string, HeldLockHandle>()

serveRequests(async (request: FairWorkerRequest) => {
  if (request.op === 'acquire') {
    const lock = await locks.acquire(request.key, { lease: request.lease, wait: request.wait })
    held.set(request.key, lock)
    return { token: lock.token.toString(), at: performance.timeOrigin + performance.now() }
  }
  await held.get(request.key)?.release()
  held.delete(request.key)
  return true
})
