import { InvalidArgumentError, LocksClosedError } from '../../errors.js'
import type { LockBackend } from '../backend.js'
import { elect } from '../election/elect.js'
import { LeaderObserver } from '../election/observer.js'
import { electionName, parseElect, type ElectOptions, type Leadership } from '../election/options.js'
import { parseObserve, type ObserveOptions } from '../election/observe-options.js'
import type { LockParts } from './lock-parts.js'

/**
 * `locks.elect(name, options)`: campaigns through the backend's election store, its
 * candidacies taken as locks on a waiting line of their own. Rejects (never throws).
 */
export function campaign<Resource>(
  parts: LockParts<Resource>,
  name: string,
  options: ElectOptions | undefined,
): Promise<Leadership> {
  try {
    if (parts.closing.aborted) throw new LocksClosedError()
    const store = electionStore(parts.backend)
    const checked = parseElect(name, options, parts.settings.leaseMs, parts.settings.maxKeyLength)
    return elect(checked.name, checked.settings, {
      closing: parts.closing,
      announce: (leader) => store.announce?.(leader) ?? Promise.resolve(),
      take: async (key, leaseMs, waitMs, signal, label) =>
        (await parts.take(
          key,
          { ...parts.settings, leaseMs, waitMs, reentrant: false, signal },
          { backend: store.candidates, line: '\u0000election\u0000', label },
        ))!,
    })
  } catch (error) {
    return Promise.reject(error)
  }
}

/** `locks.observe(name, options)`: a `LeaderObserver` on the backend's election store. */
export function observeLeader<Resource>(
  parts: LockParts<Resource>,
  name: string,
  options: ObserveOptions | undefined,
): LeaderObserver {
  if (parts.closing.aborted) throw new LocksClosedError()
  const store = electionStore(parts.backend)
  const checkedName = electionName(name, parts.settings.maxKeyLength)
  const { signal, onError } = parseObserve(options)
  return new LeaderObserver(checkedName, store, signal, parts.closing, onError)
}

function electionStore<Resource>(backend: LockBackend<Resource>): NonNullable<LockBackend['election']> {
  const store = backend.election
  if (!store)
    throw new InvalidArgumentError(
      'elect',
      `the ${backend.name} backend holds no elections (redis, etcd and zookeeper do; see docs/locks.md)`,
    )
  return store
}
