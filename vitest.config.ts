import { defineConfig } from 'vitest/config';

export default defineConfig({
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
});
