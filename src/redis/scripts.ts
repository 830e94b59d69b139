import { readFileSync } from 'node:fs'
import type { Cluster, Redis } from 'ioredis'

/** A Lua file and how many of its arguments are KEYS. */
export interface ScriptFile {
  readonly file: string
  readonly keys: number
}

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
  stampedeGuardLockRelease: { file: 'release-owner.lua', keys: 2 },
} as const

export type ScriptName = keyof typeof SCRIPTS

/** The client with `names` defined on it (and their `…Buffer` variants, whose replies are Buffers). Each takes its KEYS then ARGV, as the .lua header lists them. */
export type ClientWith<Name extends string> = (Redis | Cluster) & {
  [name in Name | `${Name}Buffer`]: (...args: (string | number | Buffer)[]) => Promise<unknown>
}

export type ScriptedClient = ClientWith<ScriptName>

const sources = new Map<string, string>()

/**
 * The script at `url`, each `--# include <file>` line replaced by that file (relative to
 * the script): the helpers several scripts share (fields.lua) are written once.
 */
function scriptSource(url: URL): string {
  return readFileSync(url, 'utf8').replace(/^--# include (\S+)$/gm, (_, file: string) => readFileSync(new URL(file, url), 'utf8'))
}

/** Defines each script of `scripts` (files relative to `directory`) on `client`, once per client. */
export function registerScripts<Name extends string>(client: Redis | Cluster, scripts: Readonly<Record<Name, ScriptFile>>, directory: URL): ClientWith<Name> {
  for (const name of Object.keys(scripts) as Name[]) {
    if (typeof (client as unknown as Record<string, unknown>)[name] === 'function') continue
    const url = new URL(scripts[name].file, directory).href
    let lua = sources.get(url)
    if (lua === undefined) {
      lua = scriptSource(new URL(url))
      sources.set(url, lua)
    }
    client.defineCommand(name, { numberOfKeys: scripts[name].keys, lua })
  }
  return client as ClientWith<Name>
}

export function defineScripts(client: Redis | Cluster): ScriptedClient {
  return registerScripts(client, SCRIPTS, new URL('./scripts/', import.meta.url))
}

/** The scripts the Redis lock backend shares with the cache: compare-and-PEXPIRE, and release by owner. */
export type SharedScriptName = 'stampedeGuardExtend' | 'stampedeGuardLockRelease'

export function defineSharedScripts(client: Redis | Cluster): ClientWith<SharedScriptName> {
  const { stampedeGuardExtend, stampedeGuardLockRelease } = SCRIPTS
  return registerScripts(client, { stampedeGuardExtend, stampedeGuardLockRelease }, new URL('./scripts/', import.meta.url))
}

