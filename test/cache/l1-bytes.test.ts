import { execFile } from 'node:child_process'
import { createRequire } from 'node:module'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { promisify } from 'node:util'
import { describe, expect, it } from 'vitest'
import { createCache, InvalidArgumentError } from '../../src/index.js'

const tsxLoader = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href
const HEAP_FIXTURE = fileURLToPath(new URL('../fixtures/l1-heap.ts', import.meta.url))

describe('l1.maxBytes', () => {
  it('keeps the heap bounded while many large values are stored', async () => {
    const maxBytes = 8 * 1024 * 1024
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ['--expose-gc', '--import', tsxLoader, HEAP_FIXTURE],
      {
        env: { ...process.env, COUNT: '2000', VALUE_BYTES: String(256 * 1024), L1_MAX_BYTES: String(maxBytes) },
        timeout: 120_000,
      },
    )
    const report = JSON.parse(stdout.trim().split('\n').at(-1)!) as {
      growthBytes: number
      storedBytes: number
      reloadsOfNewest: number
    }
    expect(report.storedBytes).toBe(500 * 1024 * 1024) // what an entry-count bound alone would keep
    // 8 MiB of one-byte strings plus bookkeeping; far below the 500 MiB stored.
    expect(report.growthBytes).toBeLessThan(4 * maxBytes)
    expect(report.reloadsOfNewest).toBe(0)
  }, 150_000)

  it('serves a value larger than the bound but does not keep it; smaller ones evict the oldest', async () => {
    const cache = createCache({ ttl: '1h', l1: { maxBytes: 1_000 } })
    let loads = 0
    const big = async () => {
      loads++
      return 'b'.repeat(2_000)
    }
    expect(await cache.getOrLoad('big', big)).toHaveLength(2_000)
    expect(await cache.getOrLoad('big', big)).toHaveLength(2_000)
    expect(loads).toBe(2) // not kept: loaded again

    for (let i = 0; i < 5; i++) await cache.getOrLoad(`small-${i}`, async () => 's'.repeat(300)) // ~302 bytes encoded each
    let reloaded = 0
    const again = (i: number) =>
      cache.getOrLoad(`small-${i}`, async () => {
        reloaded++
        return 's'.repeat(300)
      })
    await again(4)
    await again(3)
    expect(reloaded).toBe(0) // the newest three fit in 1,000 bytes
    await again(0)
    expect(reloaded).toBe(1) // the oldest was evicted
    await cache.close()
  })

  it('rejects a bound that is not a positive integer', () => {
    for (const maxBytes of [0, -1, 1.5, '64MB']) {
      expect(() => createCache({ ttl: '1h', l1: { maxBytes: maxBytes as number } })).toThrow(InvalidArgumentError)
    }
  })
})
