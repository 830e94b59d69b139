import type { Redis } from 'ioredis'

/**
 * The commands the server ran since `CONFIG RESETSTAT`, by name (INFO commandstats), less the
 * admin's own INFO and CONFIG calls: what the code under test sent.
 */
export async function commandsSinceReset(admin: Redis): Promise<Record<string, number>> {
  const sent: Record<string, number> = {}
  for (const [, name, calls] of (await admin.info('commandstats')).matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm))
    if (!/^(info|config)/.test(name!)) sent[name!] = Number(calls)
  return sent
}
