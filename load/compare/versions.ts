/** Which versions ran: each peer's installed package.json (load/compare/node_modules), ours from the root. */
import { readFile } from 'node:fs/promises'

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
