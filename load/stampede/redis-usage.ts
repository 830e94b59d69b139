/**
 * What the Redis server itself spent on a run: its CPU time (INFO cpu) and, per command,
 * calls and microseconds (INFO commandstats), as the difference of two snapshots. With the
 * probe's client-side round trips it tells a slow server from a late reply.
 */
import { Redis } from 'ioredis'

export interface RedisUsage {
  /** used_cpu_user + used_cpu_sys, ms. */
  cpuMs: number
  /** Command → calls and total µs spent in it. */
  commands: Record<string, { calls: number; usec: number }>
}

export async function redisUsage(url: string): Promise<RedisUsage> {
  const client = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1 })
  try {
    await client.connect()
    const cpu = await client.info('cpu')
    const stats = await client.info('commandstats')
    const field = (name: string) => Number(new RegExp(`^${name}:([\\d.]+)`, 'm').exec(cpu)?.[1] ?? 0)
    const commands: RedisUsage['commands'] = {}
    for (const m of stats.matchAll(/^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/gm))
      commands[m[1]!] = { calls: Number(m[2]), usec: Number(m[3]) }
    return { cpuMs: (field('used_cpu_user') + field('used_cpu_sys')) * 1000, commands }
  } finally {
    client.disconnect()
  }
}

/** after − before. */
export function usageBetween(before: RedisUsage, after: RedisUsage): RedisUsage {
  const commands: RedisUsage['commands'] = {}
  for (const [name, a] of Object.entries(after.commands)) {
    const b = before.commands[name] ?? { calls: 0, usec: 0 }
    if (a.calls > b.calls) commands[name] = { calls: a.calls - b.calls, usec: a.usec - b.usec }
  }
  return { cpuMs: after.cpuMs - before.cpuMs, commands }
}
