import { readFileSync } from 'node:fs'
import type { Cluster, Redis } from 'ioredis'

/** A Lua file and how many of its arguments are KEYS (`null`: any number, given as the first argument). */
export interface ScriptFile {
  readonly file: string
  readonly keys: number | null
}

/**
 * The client with `names` defined on it (and their `…Buffer` variants, whose replies are Buffers).
 * Each takes its KEYS then ARGV, as the .lua header lists them; a script with any number of
 * KEYS takes their count first.
 * @internal
 */
export type ClientWith<Name extends string> = (Redis | Cluster) & {
  [name in Name | `${Name}Buffer`]: (...args: (string | number | Buffer)[]) => Promise<unknown>
}

const sources = new Map<string, string>()

/**
 * The script at `url`, each `--# include <file>` line replaced by that file (relative to
 * the script, as a reader follows it): the helpers every script shares
 * (src/redis/scripts/fields.lua) are written once, whichever protocol's folder the script is in.
 * The build copies every .lua under src/ to the same place under dist/ (scripts/copy-lua.mjs).
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

/**
 * The scripts the cache and the Redis lock backends share, in this folder's scripts/: batched
 * compare-and-PEXPIRE (extend-many.lua), batched poll (poll-locks.lua) and release by owner
 * (release-owner.lua). Each protocol's own scripts live with it (src/cache/redis/scripts/,
 * src/lock/redis/scripts/) and include the helpers here (scripts/fields.lua).
 */
const SHARED_SCRIPTS = {
  stampedeGuardExtendMany: { file: 'extend-many.lua', keys: null },
  stampedeGuardPollLocks: { file: 'poll-locks.lua', keys: null },
  stampedeGuardLockRelease: { file: 'release-owner.lua', keys: 2 },
} as const

export type SharedScriptName = keyof typeof SHARED_SCRIPTS

/** @internal Defines one protocol's `scripts` (files relative to `directory`) and the shared ones on `client`. */
export function defineWithSharedScripts<Name extends string>(
  client: Redis | Cluster,
  scripts: Readonly<Record<Name, ScriptFile>>,
  directory: URL,
): ClientWith<Name | SharedScriptName> {
  registerScripts(client, SHARED_SCRIPTS, new URL('./scripts/', import.meta.url))
  return registerScripts(client, scripts, directory) as ClientWith<Name | SharedScriptName>
}
