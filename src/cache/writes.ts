import { LoadContext } from '../context.js'
import { entryFrom } from '../entry.js'
import { CacheClosedError, InvalidArgumentError } from '../errors.js'
import type { CallOptions } from '../options.js'
import { storedSize } from '../stored-value.js'
import { checkTags } from '../tag.js'
import { NEVER_ABORTED } from './call.js'
import type { CacheCore } from './core.js'
import type { LoadLeader } from './lead.js'
import { entryKeys } from './redis/keys.js'
import { commitTagged, invalidateTags } from './tags.js'

/** `cache.set`: the value written as a load's commit would be, fenced, and announced once written. */
export async function setValue<V>(
  core: CacheCore,
  leader: LoadLeader,
  key: string,
  value: V,
  options: CallOptions | undefined,
): Promise<void> {
  const call = core.call(key, () => value, options)
  // A tagged value set now predates an invalidation after this (undefined: the clock is not measured yet).
  const [startedAt, startedLocal] = [core.store?.clock.now(), performance.now()]
  if (value === undefined) throw new InvalidArgumentError('value', 'undefined cannot be stored; use null for "nothing"')
  const data = core.entries.encode(key, value)
  core.forget(key)
  const epoch = core.deletions // a delete() while we write must win over this value in L1
  const life = core.jittered(new LoadContext(key, NEVER_ABORTED, undefined, call.policy).lifetimes(0))
  let version: string | undefined
  const writtenFrom = performance.now() // L1's copy lives no longer than Redis's, which counts from when the write ran
  if (core.store) {
    const keys = entryKeys(core.settings.namespace, key)
    const request = { lockValue: '', token: '', data, ...life }
    // Announced with this tick's other invalidations once written, not by the commit itself.
    const announced = { ...core.forgetMessage(key), afterWrite: true }
    core.invalidations!.sendPending() // deletes called before this set() run before its commit
    if (call.tags) {
      const outcome = await commitTagged(
        core.store,
        core.tagStore!,
        keys,
        key,
        request,
        leader.tagged(call.tags, startedAt, startedLocal),
        announced,
        core.retentionMs,
      )
      if (outcome.version === undefined) return void leader.notStored(key, undefined, outcome.refused)
      version = outcome.version
    } else {
      version = await core.store.commit(keys, request, announced, core.retentionMs)
    }
    if (version === undefined) return
    await core.invalidations!.announce(key) // the write is done: other processes drop their copy
  }
  if (core.deletions === epoch)
    core.rememberTagged({ ...call, epoch }, entryFrom(value, life, writtenFrom, version, storedSize(data)), call.tags)
}

/** `cache.deleteByTags`: the tags marked invalidated (each on its own slot, in parallel), then their members deleted. */
export async function deleteByTags(core: CacheCore, tags: readonly string[]): Promise<void> {
  if (core.closed) throw new CacheClosedError()
  const checked = checkTags(tags, 'tags')
  for (const tag of checked) core.forgetTag(tag, 'process')
  const store = core.store
  if (!store) return
  const how = {
    namespace: core.settings.namespace,
    id: core.id,
    retentionMs: core.retentionMs,
    forget: (key: string) => core.forget(key),
    invalidate: (key: string) => core.invalidations!.invalidate(entryKeys(core.settings.namespace, key)),
  }
  await invalidateTags(store, core.tagStore!, checked, how)
}
