/* global URL, console, process */
// `npm run compare` step 1: installs the peers into load/compare/node_modules on first use
// (and again whenever load/compare/package-lock.json changed), with the locked versions.
import { spawnSync } from 'node:child_process'
import { statSync } from 'node:fs'
import { fileURLToPath } from 'node:url'

const dir = fileURLToPath(new URL('.', import.meta.url))
const mtime = (file) => {
  try {
    return statSync(new URL(file, import.meta.url)).mtimeMs
  } catch {
    return -1
  }
}
// npm writes node_modules/.package-lock.json after every install.
if (mtime('./node_modules/.package-lock.json') < mtime('./package-lock.json')) {
  console.log('npm run compare: installing the peers into load/compare/node_modules (first use) …')
  const result = spawnSync('npm', ['ci', '--no-audit', '--no-fund'], { cwd: dir, stdio: 'inherit' })
  if (result.status !== 0) process.exit(result.status ?? 1)
}
