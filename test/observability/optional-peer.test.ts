/**
 * @opentelemetry/api is an optional peer: without it, the main entry and
 * stampede-guard/express load and work, because neither imports it. A child process
 * runs with every @opentelemetry import made to fail, as in an app that never installed it.
 */
import { spawnSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { tsxExecArgv } from '../../load/shared/fork-ts.js'

const here = (path: string) => fileURLToPath(new URL(path, import.meta.url))

function runWithoutOtel(...entries: string[]) {
  const child = spawnSync(
    process.execPath,
    [
      ...tsxExecArgv(),
      '--import',
      here('./fixtures/block-otel.mjs'),
      here('./fixtures/use-without-otel.ts'),
      ...entries.map(here),
    ],
    {
      encoding: 'utf8',
      timeout: 60_000,
    },
  )
  return { code: child.status, out: `${child.stdout}\n${child.stderr}` }
}

describe('without @opentelemetry installed', () => {
  it('the main entry and stampede-guard/express load, and a cache works', () => {
    const run = runWithoutOtel('../../src/index.ts', '../../src/express/index.ts')
    expect(run.out).toContain('value 42')
    expect(run.code, run.out).toBe(0)
  })

  it('(control) stampede-guard/otel does need it: the block is effective', () => {
    const run = runWithoutOtel('../../src/observability/index.ts')
    expect(run.code).not.toBe(0)
    expect(run.out).toContain('BLOCKED @opentelemetry/api')
  })
})
