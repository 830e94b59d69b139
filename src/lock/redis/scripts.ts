import type { Cluster, Redis } from 'ioredis'
import { defineSharedScripts, registerScripts, type ClientWith, type SharedScriptName } from '../../redis/scripts.js'

const SCRIPTS = {
  stampedeGuardLockAcquire: { file: 'acquire.lua', keys: 2 },
} as const

/** @internal A client with the lock scripts: acquire.lua here, and those shared with the cache (extend-many.lua, poll-locks.lua, release-owner.lua). */
export type LockClient = ClientWith<keyof typeof SCRIPTS | SharedScriptName>

/** @internal */
export function defineLockScripts(client: Redis | Cluster): LockClient {
  defineSharedScripts(client)
  return registerScripts(client, SCRIPTS, new URL('./', import.meta.url)) as LockClient
}
