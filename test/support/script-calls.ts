/**
 * Counting the script calls a client sends, by Lua file: how tests and benchmarks count
 * polls and renewals (a batched call also counts the keys it carries) without the
 * server-wide INFO counters, which every process on the server adds to.
 */
import { createHash } from 'node:crypto'
import { readdirSync } from 'node:fs'
import type { Redis } from 'ioredis'
import { scriptSource } from '../../src/redis/scripts.js'

/** sha1 → file name of every Lua script the library ships (as sent: includes expanded). */
export function scriptFiles(): Map<string, string> {
  const names = new Map<string, string>()
  for (const dir of ['../../src/redis/scripts/', '../../src/cache/redis/scripts/', '../../src/lock/redis/scripts/']) {
    const url = new URL(dir, import.meta.url)
    for (const file of readdirSync(url).filter((name) => name.endsWith('.lua'))) {
      names.set(
        createHash('sha1')
          .update(scriptSource(new URL(file, url)))
          .digest('hex'),
        file,
      )
    }
  }
  return names
}

/** The script a command runs (`EVALSHA`, or the `EVAL` ioredis sends first on a connection), or undefined. */
export function scriptOf(command: { name: string; args: unknown[] }, files: Map<string, string>): string | undefined {
  const name = command.name.toLowerCase()
  if (name === 'evalsha') return files.get(String(command.args[0])) ?? 'unknown'
  if (name === 'eval') return files.get(createHash('sha1').update(String(command.args[0])).digest('hex')) ?? 'unknown'
  return undefined
}

export type ScriptCounts = Record<string, { calls: number; keys: number }>

/** Counts from now on the script calls `client` sends (its own connection only), by file. */
export function countScripts(client: Redis): ScriptCounts {
  const files = scriptFiles()
  const counts: ScriptCounts = {}
  const send = client.sendCommand.bind(client)
  client.sendCommand = ((command: { name: string; args: unknown[] }, ...rest: unknown[]) => {
    const file = scriptOf(command, files)
    if (file) {
      const count = (counts[file] ??= { calls: 0, keys: 0 })
      count.calls++
      count.keys += Number(command.args[1])
    }
    return (send as (...a: unknown[]) => unknown)(command, ...rest)
  }) as typeof client.sendCommand
  return counts
}
