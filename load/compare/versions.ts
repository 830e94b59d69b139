/** Which versions ran: each peer's installed package.json (load/compare/node_modules), ours from the root, and the servers. */
import { readFile } from 'node:fs/promises'
import pg from 'pg'
import { Redis } from 'ioredis'

const readVersion = async (url: URL) => (JSON.parse(await readFile(url, 'utf8')) as { version: string }).version

export async function peerVersions(packages: string[]): Promise<Record<string, string>> {
  const versions: Record<string, string> = {
    'stampede-guard': await readVersion(new URL('../../package.json', import.meta.url)),
  }
  // ioredis: the client every peer (and ours, here) talks to Redis with.
  for (const name of [...new Set([...packages.filter(Boolean), 'ioredis'])])
    versions[name] = await readVersion(new URL(`./node_modules/${name}/package.json`, import.meta.url))
  return versions
}

/** redis-server's and PostgreSQL's own versions ('unavailable' when a server cannot be asked). */
export async function serverVersions(redisUrl: string, databaseUrl: string): Promise<Record<string, string>> {
  const redis = new Redis(redisUrl, { maxRetriesPerRequest: 1 }).on('error', () => {})
  const pool = new pg.Pool({ connectionString: databaseUrl, max: 1, connectionTimeoutMillis: 3_000 })
  try {
    const info = await redis.info('server').catch(() => '')
    const postgres = await pool.query<{ server_version: string }>('SHOW server_version').then(
      (r) => r.rows[0]?.server_version ?? 'unknown',
      () => 'unavailable',
    )
    return { 'redis-server': /redis_version:(\S+)/.exec(info)?.[1] ?? 'unavailable', postgresql: postgres }
  } finally {
    redis.disconnect()
    await pool.end()
  }
}
