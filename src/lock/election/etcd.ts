import type { Namespace } from 'etcd3'
import { boundedBackendCall } from '../backend-calls.js'
import { createEtcdBackend, type EtcdBackendSettings } from '../etcd/backend.js'
import { NewsLatch } from './feed.js'
import type { ElectionStore, LeaderFeed, LeaderReading } from './store.js'

/**
 * Leader election on etcd, as etcd's own Go `concurrency.Election`: every candidate puts a
 * key under `<namespace>:election/<name>/` with its lease (the etcd lock backend's queue),
 * the oldest key (lowest `create_revision`) leads, its `create_revision` is the term, its
 * value the candidate's id. Observers watch the prefix and re-read the oldest key on every
 * event, with one linearizable range read; the watch reports a leader's lease expiring as
 * its key's delete.
 * @internal
 */
export function etcdElection(client: Namespace, settings: EtcdBackendSettings): ElectionStore {
  const namespace = `${settings.namespace}:election`
  const candidates = createEtcdBackend(client, { ...settings, namespace })
  const prefixOf = (name: string) => `${namespace}/${encodeURIComponent(name)}/`
  const call = <T>(what: string, promise: Promise<T>) =>
    boundedBackendCall('etcd', what, promise, settings.commandTimeoutMs)
  return {
    candidates,
    async feed(name): Promise<LeaderFeed> {
      const watcher = await call('watch the election', client.watch().prefix(prefixOf(name)).create())
      const latch = new NewsLatch(() => void watcher.cancel().catch(() => {}))
      watcher.on('data', () => latch.notify())
      // A broken watch (compaction, stream error): the observer re-reads now, then on its safety timer.
      watcher.on('error', () => latch.notify())
      watcher.on('disconnected', () => latch.notify())
      watcher.on('connected', () => latch.notify())
      return latch
    },
    async read(name): Promise<LeaderReading> {
      const res = await call(
        'read the election',
        client.getAll().prefix(prefixOf(name)).sort('Create', 'Ascend').limit(1).exec(),
      )
      const oldest = res.kvs[0]
      return {
        leader: oldest ? { id: oldest.value.toString(), term: BigInt(oldest.create_revision) } : undefined,
        recheckInMs: Infinity,
      }
    },
    close: () => candidates.close(),
  }
}
