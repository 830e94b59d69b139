import { InvalidArgumentError, LockBusyError, LocksClosedError } from '../../errors.js'
import type { LockContext, LockHandle } from '../handle.js'
import { linkedSignal } from '../linked-signal.js'
import { canonicalKeys, multiContext, type MultiLockContext } from '../multi/multi.js'
import { parseCallOptions, type LockCallOptions } from '../options.js'
import type { LockParts } from './lock-parts.js'

/**
 * `locks.withLocks(keys, fn)`: takes every key in one canonical order (the backend's atomic
 * runs in one step each), all or none, within one `wait` for the whole call; then runs `fn`
 * holding them all, and releases them after it settles.
 */
export async function withLocks<Resource, T>(
  parts: LockParts<Resource>,
  keys: readonly string[],
  fn: (locks: MultiLockContext<Resource>) => T | Promise<T>,
  options: LockCallOptions | undefined,
): Promise<T> {
  if (typeof fn !== 'function') throw new InvalidArgumentError('fn', `expected a function, got ${typeof fn}`)
  if (parts.closing.aborted) throw new LocksClosedError()
  const { backend } = parts
  const sorted = canonicalKeys(keys, parts.settings.maxKeyLength)
  const settings = parseCallOptions(options, parts.settings, true)
  const deadline = performance.now() + settings.waitMs
  const contexts = new Map<string, LockContext<Resource>>()
  const taken: [string, LockHandle<Resource>][] = []
  const toTake: string[] = []
  for (const key of sorted) {
    const outer = settings.reentrant ? parts.heldInChain(key) : undefined
    if (outer) contexts.set(key, outer.nested())
    else toTake.push(key)
  }
  // Runs the backend takes in one step (Redis: consecutive keys of one slot), else one key at a time.
  const runs = backend.acquireAll && backend.atomicRuns ? backend.atomicRuns(toTake) : toTake.map((k) => [k])
  try {
    for (const run of runs) {
      const waitMs = Math.max(0, Math.round(deadline - performance.now()))
      if (run.length === 1) {
        const handle = await parts.take(run[0]!, { ...settings, waitMs })
        if (!handle) throw new LockBusyError(run[0]!, settings.waitMs)
        taken.push([run[0]!, handle])
      } else {
        const handles = await parts.takeAll(run, { ...settings, waitMs })
        handles.forEach((handle, i) => taken.push([run[i]!, handle]))
      }
    }
    for (const [key, handle] of taken) contexts.set(key, handle)
  } catch (error) {
    await Promise.all(taken.map(([, handle]) => handle.release(error).catch(() => {})))
    throw error
  }
  const lost = linkedSignal([...contexts.values()].map((lock) => lock.signal))
  try {
    return await parts.holding(taken, () => fn(multiContext(sorted, contexts, lost.signal)))
  } finally {
    lost.dispose()
  }
}
