import { defineConfig } from 'vitest/config';

// Console checks on a live system another test runs (`*.live.ts`): the
// scenarios' e2e suite starts the stack, makes the situation and runs one of
// these against its server (P4RELAY_LIVE_* in the environment). One browser.
export default defineConfig({
  test: {
    include: ['e2e/**/*.live.ts'],
    environment: 'node',
    testTimeout: 60_000,
    hookTimeout: 60_000,
    fileParallelism: false,
    sequence: { concurrent: false },
  },
});
