import { defineConfig } from 'vitest/config'

/**
 * `npm run test:unit`: the pure tests, in seconds. No server, no child process, no network:
 * whatever needs Redis, PostgreSQL, MariaDB, etcd, ZooKeeper or a worker process stays in
 * `npm test` (which runs these too). A new pure test goes in a `unit/` folder.
 */
export default defineConfig({
  test: {
    environment: 'node',
    include: [
      'test/**/unit/**/*.test.ts',
      'test/codec/tagged-json.test.ts',
      'test/options.test.ts',
      'test/cache/in-process.test.ts',
      'test/cache/deadlines.test.ts',
      'test/lock/redis/failover-retry.test.ts',
      'test/load/results-math.test.ts',
    ],
    maxWorkers: 2,
    retry: 0,
  },
})
