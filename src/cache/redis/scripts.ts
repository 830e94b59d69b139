import type { Cluster, Redis } from 'ioredis'
import { defineWithSharedScripts, type ClientWith, type SharedScriptName } from '../../redis/scripts.js'

/**
 * The cache's protocol, one Lua file per operation (in scripts/ here), registered with ioredis
 * `defineCommand`: ioredis sends EVALSHA and falls back to EVAL on NOSCRIPT (after a restart or
 * failover). The tags' scripts are registered by tags.ts.
 */
const SCRIPTS = {
  stampedeGuardGetOrLock: { file: 'get-or-lock.lua', keys: 3 },
  stampedeGuardGetOrLockMany: { file: 'get-or-lock-many.lua', keys: null },
  stampedeGuardCommit: { file: 'commit.lua', keys: 4 },
  stampedeGuardRelease: { file: 'release.lua', keys: 3 },
  stampedeGuardInvalidate: { file: 'invalidate.lua', keys: null },
} as const

/** @internal A client with the cache's scripts, and those it shares with the lock (src/redis/scripts.ts). */
export type ScriptedClient = ClientWith<keyof typeof SCRIPTS | SharedScriptName>

/** @internal */
export function defineScripts(client: Redis | Cluster): ScriptedClient {
  return defineWithSharedScripts(client, SCRIPTS, new URL('./scripts/', import.meta.url))
}
