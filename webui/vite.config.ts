/// <reference types="vitest/config" />
import { defineConfig } from 'vite';
import react from '@vitejs/plugin-react';

// The server (port 8000) serves the built console at `/` and the API under /api;
// in development Vite proxies both so the app always talks to a same-origin API.
const server = process.env.P4RELAY_SERVER ?? 'http://127.0.0.1:8000';

export default defineConfig({
  plugins: [react()],
  server: {
    port: 5173,
    proxy: {
      '/api': { target: server, ws: true, changeOrigin: true },
    },
  },
  build: {
    target: 'es2022',
    sourcemap: true,
    manifest: true,
    chunkSizeWarningLimit: 800,
  },
  test: {
    environment: 'jsdom',
    include: ['src/**/*.test.{ts,tsx}'],
    setupFiles: ['src/test/setup.ts'],
    css: false,
    // Rendering speed is measured by the bench config, not here: a loaded CI host
    // may take several times the 5 s default to render 5,000 rows in jsdom.
    testTimeout: 30_000,
  },
});
