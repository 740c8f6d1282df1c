import { defineConfig } from 'vitest/config';

// End-to-end suite: playwright-core drives Debian's Chromium against the real
// server + PostgreSQL (see e2e/harness.ts). One file at a time, one browser.
export default defineConfig({
  test: {
    include: ['e2e/**/*.e2e.ts'],
    environment: 'node',
    testTimeout: 60_000,
    hookTimeout: 120_000,
    fileParallelism: false,
    sequence: { concurrent: false },
  },
});
