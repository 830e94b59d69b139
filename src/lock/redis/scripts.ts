import type { Cluster, Redis } from 'ioredis'
import { defineWithSharedScripts, type ClientWith, type SharedScriptName } from '../../redis/scripts.js'

const SCRIPTS = {
  stampedeGuardLockAcquire: { file: 'acquire.lua', keys: 2 },
} as const

/** @internal A client with the lock scripts: acquire.lua in scripts/ here, and those shared with the cache (extend-many.lua, poll-locks.lua, release-owner.lua). */
export type LockClient = ClientWith<keyof typeof SCRIPTS | SharedScriptName>

/** @internal */
export function defineLockScripts(client: Redis | Cluster): LockClient {
  return defineWithSharedScripts(client, SCRIPTS, new URL('./scripts/', import.meta.url))
}
