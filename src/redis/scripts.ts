import { readFileSync } from 'node:fs'
import type { Cluster, Redis } from 'ioredis'

/** A Lua file and how many of its arguments are KEYS (`null`: any number, given as the first argument). */
export interface ScriptFile {
  readonly file: string
  readonly keys: number | null
}

/**
 * One Lua file per operation, registered with ioredis `defineCommand`: ioredis
 * sends EVALSHA and falls back to EVAL on NOSCRIPT (after a restart or failover).
 */
const SCRIPTS = {
  stampedeGuardGetOrLock: { file: 'get-or-lock.lua', keys: 3 },
  stampedeGuardCommit: { file: 'commit.lua', keys: 4 },
  stampedeGuardRelease: { file: 'release.lua', keys: 3 },
  stampedeGuardExtendMany: { file: 'extend-many.lua', keys: null },
  stampedeGuardPollLocks: { file: 'poll-locks.lua', keys: null },
  stampedeGuardInvalidate: { file: 'invalidate.lua', keys: 2 },
  stampedeGuardLockRelease: { file: 'release-owner.lua', keys: 2 },
} as const

export type ScriptName = keyof typeof SCRIPTS

/**
 * The client with `names` defined on it (and their `…Buffer` variants, whose replies are Buffers).
 * Each takes its KEYS then ARGV, as the .lua header lists them; a script with any number of
 * KEYS takes their count first.
 * @internal
 */
export type ClientWith<Name extends string> = (Redis | Cluster) & {
  [name in Name | `${Name}Buffer`]: (...args: (string | number | Buffer)[]) => Promise<unknown>
}

/** @internal */
export type ScriptedClient = ClientWith<ScriptName>

const sources = new Map<string, string>()

/**
 * The script at `url`, each `--# include <file>` line replaced by that file (relative to
 * the script): the helpers several scripts share (fields.lua) are written once.
 */
export function scriptSource(url: URL): string {
  return readFileSync(url, 'utf8').replace(/^--# include (\S+)$/gm, (_, file: string) =>
    readFileSync(new URL(file, url), 'utf8'),
  )
}

/** @internal Defines each script of `scripts` (files relative to `directory`) on `client`, once per client. */
export function registerScripts<Name extends string>(
  client: Redis | Cluster,
  scripts: Readonly<Record<Name, ScriptFile>>,
  directory: URL,
): ClientWith<Name> {
  for (const name of Object.keys(scripts) as Name[]) {
    if (typeof (client as unknown as Record<string, unknown>)[name] === 'function') continue
    const url = new URL(scripts[name].file, directory).href
    let lua = sources.get(url)
    if (lua === undefined) {
      lua = scriptSource(new URL(url))
      sources.set(url, lua)
    }
    const keys = scripts[name].keys
    client.defineCommand(name, keys === null ? { lua } : { numberOfKeys: keys, lua })
  }
  return client as ClientWith<Name>
}

/** @internal */
export function defineScripts(client: Redis | Cluster): ScriptedClient {
  return registerScripts(client, SCRIPTS, new URL('./scripts/', import.meta.url))
}

/** The scripts the Redis lock backend shares with the cache: batched compare-and-PEXPIRE, batched poll, and release by owner. */
export type SharedScriptName = 'stampedeGuardExtendMany' | 'stampedeGuardPollLocks' | 'stampedeGuardLockRelease'

/** @internal */
export function defineSharedScripts(client: Redis | Cluster): ClientWith<SharedScriptName> {
  const { stampedeGuardExtendMany, stampedeGuardPollLocks, stampedeGuardLockRelease } = SCRIPTS
  return registerScripts(
    client,
    { stampedeGuardExtendMany, stampedeGuardPollLocks, stampedeGuardLockRelease },
    new URL('./scripts/', import.meta.url),
  )
}
