/**
 * A read-write lock and an election keep their holds and waiting lines under names that start
 * with U+0000. A user key spelled the same way used to share them: `withLock('\0rw-write\0doc')`
 * made `readWrite('doc').write()` run without the write lock (two writers), and a free lock
 * named `'\0election\0e'` queued behind a waiting candidate. Keys with U+0000 are refused now.
 */
import { describe, expect, it } from 'vitest'
import { InvalidArgumentError } from '../../../src/index.js'
import { useRedisLocks } from '../../support/lock-suite.js'
import { redisAvailable } from '../../support/redis.js'

describe.skipIf(!redisAvailable)('keys with U+0000 are reserved', () => {
  const { locks, redis } = useRedisLocks('reserved')

  for (const key of ['\u0000rw-write\u0000doc', '\u0000rw-read\u0000doc', '\u0000election\u0000e1', 'a\u0000b']) {
    it(`withLock(${JSON.stringify(key)}) rejects with InvalidArgumentError naming key, and sends nothing`, async () => {
      const before = Number((await redis().info('stats')).match(/total_commands_processed:(\d+)/)![1])
      let ran = false
      const error = await locks()
        .withLock(key, () => {
          ran = true
        })
        .catch((e: unknown) => e)
      expect(error).toBeInstanceOf(InvalidArgumentError)
      expect((error as InvalidArgumentError).argument).toBe('key')
      expect(ran).toBe(false)
      const after = Number((await redis().info('stats')).match(/total_commands_processed:(\d+)/)![1])
      expect(after - before).toBe(1) // the first INFO itself
    })
  }

  it('a read-write lock and an election on names without U+0000 still work', async () => {
    const rw = locks().readWrite('doc')
    expect(await rw.write(() => 'written')).toBe('written')
    const leader = await locks().elect('e1', { id: 'one' })
    expect(leader.leading).toBe(true)
    await leader.resign()
  })
})
