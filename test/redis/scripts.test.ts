/**
 * The Lua scripts in their homes (the shared src/redis/scripts/, the cache's
 * src/cache/redis/scripts/, the lock's src/lock/redis/scripts/, and beside the lock primitives
 * that have scripts of their own: fair/, semaphore/redis/): every include resolves, stays
 * inside src/ (so the build's copy to dist/ resolves it the same way), and Redis compiles what
 * the loader sends.
 */
import { createHash } from 'node:crypto'
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { scriptSource } from '../../src/redis/scripts.js'
import { redisAvailable, startRedis, stopAllRedis, type RedisServer } from '../support/redis.js'

const SRC = fileURLToPath(new URL('../../src/', import.meta.url))
/** Every .lua under src/, as paths relative to it. */
const LUA = readdirSync(SRC, { recursive: true })
  .map(String)
  .filter((file) => file.endsWith('.lua'))
  .sort()
/** Fragments: the files some script includes (fields.lua, token.lua, …); they are never sent alone. */
const INCLUDED = new Set(
  LUA.flatMap((file) =>
    [...readFileSync(path.join(SRC, file), 'utf8').matchAll(/^--# include (\S+)/gm)].map((m) =>
      path.normalize(path.join(path.dirname(file), m[1]!)),
    ),
  ),
)
/** The scripts: every .lua that is not a fragment. */
const SCRIPTS = LUA.filter((file) => !INCLUDED.has(file))
const source = (root: string, file: string) => scriptSource(pathToFileURL(path.join(root, file)))

describe('Lua scripts and their includes', () => {
  it('live in their homes, and each expands with no include left', () => {
    expect(new Set(LUA.map((file) => path.dirname(file)))).toEqual(
      new Set([
        'redis/scripts',
        'cache/redis/scripts',
        'lock/redis/scripts',
        'lock/redis/fair',
        'lock/semaphore/redis',
        'lock/multi',
        'lock/read-write',
        'lock/coalesce',
      ]),
    )
    expect(INCLUDED).toContain('redis/scripts/fields.lua')
    expect(SCRIPTS.length).toBeGreaterThanOrEqual(12)
    for (const file of SCRIPTS) {
      const lua = source(SRC, file)
      expect(lua, file).not.toMatch(/^--# include/m)
      // a script that includes the shared rules has them expanded in place
      if (/^--# include \S*fields\.lua/m.test(readFileSync(path.join(SRC, file), 'utf8')))
        expect(lua, file).toContain('local function tokenField(')
    }
  })

  it('a copy of the .lua files laid out as the build lays them out (dist/) expands to the same scripts', () => {
    const copy = mkdtempSync(path.join(tmpdir(), 'sg-lua-'))
    try {
      for (const file of LUA) cpSync(path.join(SRC, file), path.join(copy, file))
      for (const file of SCRIPTS) expect(source(copy, file), file).toBe(source(SRC, file))
    } finally {
      rmSync(copy, { recursive: true, force: true })
    }
  })
})

describe.skipIf(!redisAvailable)('Redis compiles every script as the loader sends it', () => {
  let server: RedisServer
  beforeAll(async () => {
    server = await startRedis()
  })
  afterAll(stopAllRedis)

  it('SCRIPT LOAD accepts each one, under the SHA-1 ioredis sends with EVALSHA', async () => {
    for (const file of SCRIPTS) {
      const lua = source(SRC, file)
      const sha = await server.client().script('LOAD', lua)
      expect(sha, file).toBe(createHash('sha1').update(lua).digest('hex'))
    }
  })
})
