// tsc does not copy non-TypeScript files; the Lua scripts are read at run time next to the .js
// that loads them (src/redis/scripts/, src/cache/redis/scripts/, src/lock/redis/scripts/), and
// include each other by relative path, so copy every .lua under src/ to the same place in dist/.
import { cpSync, readdirSync } from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)))
const src = path.join(root, 'src')
for (const file of readdirSync(src, { recursive: true })) {
  if (String(file).endsWith('.lua')) cpSync(path.join(src, String(file)), path.join(root, 'dist', String(file)))
}
