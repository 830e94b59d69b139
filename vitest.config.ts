import { transform } from 'esbuild'
import ts from 'typescript'
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
    if (LEGACY_DECORATOR_FILES.test(id)) return legacyDecorators(code, id)
    const result = await transform(code, { loader: 'ts', target: 'es2022', sourcemap: true, sourcefile: id })
    return { code: result.code, map: result.map }
  },
}

/**
 * NestJS apps are compiled with `experimentalDecorators` and `emitDecoratorMetadata` (Nest
 * reads constructor parameter types from it), which esbuild cannot emit. Files of the Nest
 * adapter's tests and example (a `nestjs` folder or file name) go through TypeScript
 * instead, as a Nest user's `tsc` compiles them; they are type-checked by
 * tsconfig.nestjs.json.
 */
const LEGACY_DECORATOR_FILES = /[\\/]nestjs[\\/]|[\\/][^\\/]*nestjs[^\\/]*\.ts$/

function legacyDecorators(code: string, id: string) {
  const { outputText, sourceMapText } = ts.transpileModule(code, {
    fileName: id,
    compilerOptions: {
      target: ts.ScriptTarget.ES2022,
      module: ts.ModuleKind.ESNext,
      experimentalDecorators: true,
      emitDecoratorMetadata: true,
      sourceMap: true,
    },
  })
  return { code: outputText.replace(/\/\/# sourceMappingURL=.*$/m, ''), map: sourceMapText }
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
