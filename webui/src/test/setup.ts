import '@testing-library/jest-dom/vitest';
import { cleanup, configure } from '@testing-library/react';
import { afterEach } from 'vitest';

// findBy/waitFor wait for a render, whose time no page promises: on a loaded
// host it outlasts the 1 s default.
configure({ asyncUtilTimeout: 10_000 });

afterEach(() => {
  cleanup();
  localStorage.clear();
});

// jsdom has no layout: give the virtualiser a viewport so rows render.
for (const [prop, value] of [['offsetHeight', 600], ['clientHeight', 600], ['offsetWidth', 1000], ['clientWidth', 1000]] as const) {
  Object.defineProperty(HTMLElement.prototype, prop, { configurable: true, get: () => value });
}
if (!('ResizeObserver' in globalThis)) {
  class RO {
    observe(): void {}
    unobserve(): void {}
    disconnect(): void {}
  }
  (globalThis as unknown as { ResizeObserver: typeof RO }).ResizeObserver = RO;
}
// jsdom lacks matchMedia; the theme asks it for prefers-color-scheme.
window.matchMedia = (query: string) =>
  ({
    matches: false, media: query, onchange: null,
    addEventListener: () => undefined, removeEventListener: () => undefined, dispatchEvent: () => false,
  }) as unknown as MediaQueryList;
