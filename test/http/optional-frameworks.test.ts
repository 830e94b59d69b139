/**
 * Every framework is an optional peer: with fastify, hono and express all unresolvable, the
 * main entry and every adapter entry load (the Fastify entry uses Fastify's types only, the
 * Hono entry takes Hono's context by shape), and cacheFetch serves from the cache.
 */
import { spawnSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { tsxExecArgv } from '../../load/shared/fork-ts.js'

const here = (path: string) => fileURLToPath(new URL(path, import.meta.url))

function runWithoutFrameworks(...entries: string[]) {
  const child = spawnSync(
    process.execPath,
    [
      ...tsxExecArgv(),
      '--import',
      here('./fixtures/block-frameworks.mjs'),
      here('./fixtures/use-without-frameworks.ts'),
      ...entries.map(here),
    ],
    { encoding: 'utf8', timeout: 60_000 },
  )
  return { code: child.status, out: `${child.stdout}\n${child.stderr}` }
}

describe('without fastify, hono or express installed', () => {
  it('the main entry and the express, fastify and hono entries load; cacheFetch serves a MISS then a HIT', () => {
    const run = runWithoutFrameworks(
      '../../src/index.ts',
      '../../src/express/index.ts',
      '../../src/fastify/index.ts',
      '../../src/hono/index.ts',
    )
    expect(run.out).toContain('MISS run 1, HIT run 1')
    expect(run.code, run.out).toBe(0)
  })

  it('(control) the block is effective: importing fastify itself fails', () => {
    const run = runWithoutFrameworks('./fixtures/imports-fastify.ts')
    expect(run.code).not.toBe(0)
    expect(run.out).toContain('BLOCKED')
  })
})
