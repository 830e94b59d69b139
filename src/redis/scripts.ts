import { readFileSync } from 'node:fs'
import type { Cluster, Redis } from 'ioredis'

/**
 * One Lua file per operation, registered with ioredis `defineCommand`: ioredis
 * sends EVALSHA and falls back to EVAL on NOSCRIPT (after a restart or failover).
 */
const SCRIPTS = {
  stampedeGuardGetOrLock: { file: 'get-or-lock.lua', keys: 3 },
  stampedeGuardCommit: { file: 'commit.lua', keys: 4 },
  stampedeGuardRelease: { file: 'release.lua', keys: 3 },
  stampedeGuardExtend: { file: 'extend.lua', keys: 1 },
  stampedeGuardInvalidate: { file: 'invalidate.lua', keys: 2 },
} as const

export type ScriptName = keyof typeof SCRIPTS

/** The client with our commands on it. Each takes its KEYS then ARGV, as the .lua header lists them. */
export type ScriptedClient = (Redis | Cluster) & {
  [name in ScriptName | `${ScriptName}Buffer`]: (...args: (string | number | Buffer)[]) => Promise<unknown>
}

const sources = new Map<ScriptName, string>()
function source(name: ScriptName): string {
  let lua = sources.get(name)
  if (lua === undefined) {
    lua = readFileSync(new URL(`./scripts/${SCRIPTS[name].file}`, import.meta.url), 'utf8')
    sources.set(name, lua)
  }
  return lua
}

export function defineScripts(client: Redis | Cluster): ScriptedClient {
  for (const name of Object.keys(SCRIPTS) as ScriptName[]) {
    if (typeof (client as unknown as Record<string, unknown>)[name] !== 'function') {
      client.defineCommand(name, { numberOfKeys: SCRIPTS[name].keys, lua: source(name) })
    }
  }
  return client as ScriptedClient
}

