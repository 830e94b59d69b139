import type { Cluster, Redis } from 'ioredis'
import { defineExtendScript, registerScripts, type ClientWith } from '../../redis/scripts.js'

const SCRIPTS = {
  stampedeGuardLockAcquire: { file: 'acquire.lua', keys: 2 },
  stampedeGuardLockRelease: { file: 'release.lua', keys: 2 },
} as const

/** A client with the lock scripts: acquire.lua, release.lua here, and the cache's compare-and-PEXPIRE (extend.lua). */
export type LockClient = ClientWith<keyof typeof SCRIPTS | 'stampedeGuardExtend'>

export function defineLockScripts(client: Redis | Cluster): LockClient {
  defineExtendScript(client)
  return registerScripts(client, SCRIPTS, new URL('./', import.meta.url)) as LockClient
}
