import { defineConfig } from 'vitest/config';

// `make bench` stage: the live-table benchmark against the real server.
export default defineConfig({
  test: {
    include: ['e2e/**/*.bench.ts'],
    environment: 'node',
    testTimeout: 600_000,
    hookTimeout: 120_000,
    fileParallelism: false,
  },
});
