/**
 * A semaphore user in its own process, for the cross-process semaphore tests. It can be
 * SIGKILLed or SIGSTOPped by the test like any app instance.
 *
 * env SEMAPHORE_WORKER = JSON `SemaphoreWorkerConfig`. A wall clock that is off is set up
 * before this module loads (./clock-shim.mjs, see `clockOffsetEnv`).
 */
import { Redis } from 'ioredis'
import { createLocks, type HeldPermitsHandle } from '../../../src/index.js'
import { serveRequests } from '../../support/worker-side.js'
import {
  ENTER_LUA,
  LEAVE_LUA,
  type AcquireReply,
  type ContendReply,
  type ReleaseReply,
  type SemaphoreWorkerConfig,
  type SemaphoreWorkerRequest,
} from './protocol.js'

const config = JSON.parse(process.env.SEMAPHORE_WORKER ?? '{}') as SemaphoreWorkerConfig
const client = new Redis({
  host: '127.0.0.1',
  port: config.port,
  autoResendUnfulfilledCommands: config.resend ?? true,
})
client.on('error', () => {}) // resets in the tests: commands report them
const resource = config.resourcePort ? new Redis({ host: '127.0.0.1', port: config.resourcePort }) : undefined
async function etcdClient(hosts: string[]) {
  const { Etcd3 } = await import('etcd3')
  return new Etcd3({ hosts })
}
async function zookeeperClient({ connect, sessionMs }: { connect: string; sessionMs: number }) {
  const { connectZooKeeper } = await import('../../support/zookeeper.js')
  return connectZooKeeper(connect, { sessionTimeout: sessionMs })
}
const locks = config.etcdHosts
  ? createLocks({ etcd: await etcdClient(config.etcdHosts), namespace: config.namespace ?? 'sem' })
  : config.zookeeper
    ? createLocks({ zookeeper: await zookeeperClient(config.zookeeper), namespace: config.namespace ?? 'sem' })
    : config.postgresDatabase
      ? createLocks({
          postgres: await (
            await import('../../support/databases.js')
          ).pgPool(config.postgresDatabase, {
            max: 60,
            ...(config.postgresPort ? { port: config.postgresPort } : {}),
          }),
          namespace: config.namespace ?? 'sem',
        })
      : createLocks({ redis: client, namespace: config.namespace ?? 'sem' })
const held = new Map<string, HeldPermitsHandle>()

serveRequests(async (request: SemaphoreWorkerRequest) => {
  switch (request.op) {
    case 'acquire': {
      const permits = await locks
        .semaphore(request.name, { permits: request.permits })
        .acquire(request.count, { lease: request.lease, wait: request.wait })
      held.set(request.id, permits)
      return { tokens: permits.tokens.map(String), at: Date.now() } satisfies AcquireReply
    }
    case 'state': {
      const permits = held.get(request.id)
      return { aborted: permits?.signal.aborted ?? false, validForMs: permits?.validForMs ?? 0 }
    }
    case 'release': {
      const permits = held.get(request.id)!
      held.delete(request.id)
      try {
        await permits.release()
        return { released: true } satisfies ReleaseReply
      } catch (error) {
        return {
          released: false,
          error: (error as Error).name,
          message: (error as Error).message,
        } satisfies ReleaseReply
      }
    }
    case 'contend':
      return contend(request)
    case 'race-release': {
      // A renewal sent and a release right behind it, many times: the permit must be gone
      // after each release, and stay gone (a late renewal must not bring it back).
      // A round paused past its lease (a loaded machine) has its release reported lost: counted, not fatal.
      const semaphore = locks.semaphore(request.name, { permits: 1 })
      let lost = 0
      for (let i = 0; i < request.rounds; i++) {
        const permit = await semaphore.acquire(1, { lease: request.lease, wait: '30s' })
        const renewal = permit.extend().catch(() => {})
        await permit.release().catch((error: Error) => {
          if (error.name !== 'LockLostError') throw error
          lost++
        })
        await renewal
      }
      return { lost }
    }
  }
})

async function contend(request: Extract<SemaphoreWorkerRequest, { op: 'contend' }>): Promise<ContendReply> {
  const semaphore = locks.semaphore(request.name, { permits: request.permits })
  let entries = 0
  const errors: string[] = []
  const keys = [`${request.name}:inside`, `${request.name}:max`, `${request.name}:entries`]
  await Promise.all(
    Array.from({ length: request.holders }, async () => {
      for (let i = 0; i < request.iterations; i++) {
        if (request.stopKey && (await resource!.exists(request.stopKey))) return
        try {
          await semaphore.withPermit(
            async () => {
              await resource!.eval(ENTER_LUA, 3, ...keys, request.count ?? 1)
              entries++
              await new Promise((resolve) => setTimeout(resolve, request.holdMs ?? 1))
              await resource!.eval(LEAVE_LUA, 1, keys[0]!, request.count ?? 1)
            },
            { count: request.count ?? 1, lease: request.lease, wait: '120s' },
          )
        } catch (error) {
          errors.push(`${(error as Error).name}: ${(error as Error).message}`)
        }
      }
    }),
  )
  return { entries, errors }
}
