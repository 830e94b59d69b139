/**
 * A `withLocks` caller in its own process (./backend-suite.ts), on PostgreSQL, MariaDB,
 * etcd or ZooKeeper through the public front. env MULTI_WORKER = JSON `MultiWorkerConfig`.
 * - `contend`: `rounds` calls of `withLocks(keys)`; inside each, every key enters the
 *   counted resource (ENTER_LUA) and leaves it after `holdMs`. Failed calls are counted
 *   by error name, not thrown.
 * - `hold` / `release`: one key's lock held by this process until told (the blocker).
 */
import { Etcd3 } from 'etcd3'
import { Redis } from 'ioredis'
import { createLocks, type HeldLockHandle, type Locks } from '../../../src/lock/index.js'
import { mysqlPool, pgPool } from '../../support/databases.js'
import { sleep } from '../../support/timing.js'
import { serveRequests } from '../../support/worker-side.js'
import { connectZooKeeper } from '../../support/zookeeper.js'
import { ENTER_LUA, type ContendReply, type MultiWorkerConfig, type MultiWorkerRequest } from './protocol.js'

const config = JSON.parse(process.env.MULTI_WORKER!) as MultiWorkerConfig

async function connect(): Promise<Locks<unknown>> {
  const { store, namespace } = config
  switch (store.backend) {
    case 'postgres':
      return createLocks<unknown>({ postgres: await pgPool(store.database, { max: 6 }), namespace })
    case 'mysql':
      return createLocks<unknown>({ mysql: await mysqlPool(store.database, { connectionLimit: 6 }), namespace })
    case 'etcd':
      return createLocks<unknown>({ etcd: new Etcd3({ hosts: store.hosts }), namespace })
    case 'zookeeper': {
      const client = await connectZooKeeper(store.connect, { sessionTimeout: store.sessionMs })
      return createLocks<unknown>({ zookeeper: client, namespace })
    }
  }
}

const locks = await connect()
const resource = new Redis({ host: '127.0.0.1', port: config.resourcePort })
resource.defineCommand('enter', { numberOfKeys: 3, lua: ENTER_LUA })
const enter = (key: string, token: bigint, stats: string) =>
  (resource as unknown as { enter(...args: unknown[]): Promise<number> }).enter(
    `${stats}:inside:${key}`,
    `${stats}:token:${key}`,
    stats,
    token.toString(),
  )
const held = new Map<string, HeldLockHandle<unknown>>()

async function contend(request: Extract<MultiWorkerRequest, { op: 'contend' }>): Promise<ContendReply> {
  const errors: Record<string, number> = {}
  let rounds = 0
  for (let round = 0; round < request.rounds; round++) {
    try {
      await locks.withLocks(
        request.keys,
        async ({ keys, tokens }) => {
          for (const key of keys) await enter(key, tokens.get(key)!, request.stats)
          await sleep(request.holdMs)
          for (const key of keys) await resource.decr(`${request.stats}:inside:${key}`)
        },
        { wait: request.wait },
      )
      rounds++
    } catch (error) {
      const name = (error as Error).name
      errors[name] = (errors[name] ?? 0) + 1
    }
  }
  return { rounds, errors }
}

serveRequests(async (request: MultiWorkerRequest) => {
  switch (request.op) {
    case 'contend':
      return contend(request)
    case 'hold': {
      const lock = await locks.acquire(request.key, { wait: '30s' })
      held.set(request.key, lock)
      return lock.token.toString()
    }
    case 'release':
      await held.get(request.key)?.release()
      held.delete(request.key)
      return true
  }
})
