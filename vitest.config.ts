import { transform } from 'esbuild'
import { defineConfig, type Plugin } from 'vitest/config'

/**
 * Vite's Oxc transform leaves standard (TC39) decorators as they are, and Node 20 cannot
 * parse them. Files that use one (`@locked` tests) go through esbuild first, which lowers
 * them as `tsc` does for users.
 */
const standardDecorators: Plugin = {
  name: 'standard-decorators',
  enforce: 'pre',
  async transform(code, id) {
    if (!id.endsWith('.ts') || !/^\s*@[A-Za-z_$][\w$.]*\(/m.test(code)) return undefined
    const result = await transform(code, { loader: 'ts', target: 'es2022', sourcemap: true, sourcefile: id })
    return { code: result.code, map: result.map }
  },
}

export default defineConfig({
  plugins: [standardDecorators],
  test: {
    environment: 'node',
    include: ['test/**/*.test.ts'],
    // Separate processes: each test file owns its redis-servers/workers, killed on its exit.
    pool: 'forks',
    // 2-core machine: two files at a time, each also running redis-server children.
    maxWorkers: 2,
    testTimeout: 60_000,
    hookTimeout: 60_000,
    teardownTimeout: 20_000,
    retry: 0, // flaky tests are bugs
  },
})
