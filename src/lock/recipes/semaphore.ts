import { InvalidArgumentError, LocksClosedError } from '../../errors.js'
import type { LockHandle } from '../handle.js'
import { parseSemaphore, type SemaphoreOptions } from '../semaphore/options.js'
import { Semaphore } from '../semaphore/semaphore.js'
import type { LockParts } from './lock-parts.js'

/**
 * `locks.semaphore(name, options)`: a `Semaphore` over the backend's semaphore store, whose
 * permits are taken through the `Locks` object (its waits, events and `close()`).
 */
export function openSemaphore<Resource>(
  parts: LockParts<Resource>,
  name: string,
  options: SemaphoreOptions,
): Semaphore {
  if (parts.closing.aborted) throw new LocksClosedError()
  const settings = parseSemaphore(name, options, parts.settings)
  const store = parts.backend.semaphores
  if (!store)
    throw new InvalidArgumentError('backend', `the ${parts.backend.name} backend has no semaphore (see docs/locks.md)`)
  // Permits hold no resource: the handle's Resource is void whatever this backend's is.
  return new Semaphore(
    settings,
    store,
    (key, call, acquire) =>
      parts.take(key, { ...parts.settings, ...call, reentrant: false }, { acquire: acquire as never }) as Promise<
        LockHandle<void> | undefined
      >,
  )
}
