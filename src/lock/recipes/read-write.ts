import { InvalidArgumentError, LockBusyError, LocksClosedError } from '../../errors.js'
import { namedKey, parseCallOptions } from '../options.js'
import { ReadWriteLock } from '../read-write/read-write.js'
import type { LockParts } from './lock-parts.js'

/**
 * `locks.readWrite(name)`: a `ReadWriteLock` whose sides are the backend's readers and
 * writers, each taken on its own waiting line and held in the call chain by its own key.
 */
export function openReadWrite<Resource>(parts: LockParts<Resource>, name: string): ReadWriteLock<Resource> {
  if (parts.closing.aborted) throw new LocksClosedError()
  const store = parts.backend.readWrite
  if (!store)
    throw new InvalidArgumentError(
      'readWrite',
      `the ${parts.backend.name} backend has no read-write locks (redis, postgres in transaction mode, etcd and zookeeper have; see docs/locks.md)`,
    )
  const checkedName = namedKey('name', name, parts.settings.maxKeyLength)
  return new ReadWriteLock<Resource>(checkedName, {
    held: (chainKey) => parts.heldInChain(chainKey),
    take: async (side, chainKey, options) => {
      const settings = { ...parseCallOptions(options, parts.settings, true), reentrant: false }
      const backend = side === 'read' ? store.readers : store.writers
      const handle = await parts.take(checkedName, settings, { backend, line: chainKey })
      if (!handle) throw new LockBusyError(checkedName, 0)
      return handle
    },
    holding: (chainKey, handle, fn) => parts.holding([[chainKey, handle]], fn),
  })
}
