// Renders a page inside the app's providers with a live store the test fills.
import type { ReactElement } from 'react';
import { render } from '@testing-library/react';
import { createMemoryRouter, RouterProvider } from 'react-router';
import { LiveContext, type LiveCtx } from '../api/live';
import { LiveSessionStore } from '../api/liveStore';
import { makeQueryClient, Providers } from '../App';

export function renderWithLive(ui: ReactElement, opts: { path?: string; route?: string; store?: LiveSessionStore } = {}) {
  const store = opts.store ?? new LiveSessionStore(10);
  const live: LiveCtx = { store, status: 'live', congestion: new Map(), onMessage: () => () => undefined };
  const router = createMemoryRouter(
    [
      { path: opts.route ?? '/', element: <LiveContext.Provider value={live}>{ui}</LiveContext.Provider> },
      { path: '*', element: <p>elsewhere</p> },
    ],
    { initialEntries: [opts.path ?? '/'] },
  );
  const client = makeQueryClient();
  const utils = render(
    <Providers client={client}>
      <RouterProvider router={router} />
    </Providers>,
  );
  return { ...utils, store, router, client };
}
