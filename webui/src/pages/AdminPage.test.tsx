import { screen } from '@testing-library/react';
import { afterEach, describe, expect, it, vi } from 'vitest';
import AdminPage from './AdminPage';
import { renderWithLive } from '../test/render';

afterEach(() => {
  vi.unstubAllGlobals();
});

describe('AdminPage', () => {
  it('tells a viewer no, without asking the server for users or tokens', async () => {
    localStorage.setItem('p4relay.token', 'viewer-jwt');
    const fetchMock = vi.fn((req: Request) => {
      const path = new URL(req.url).pathname;
      const body = path === '/api/v1/auth/me' ? { kind: 'user', id: 2, name: 'noc', role: 'viewer', scope: null } : { detail: 'admin role required' };
      return Promise.resolve(new Response(JSON.stringify(body), {
        status: path === '/api/v1/auth/me' ? 200 : 403, headers: { 'Content-Type': 'application/json' },
      }));
    });
    vi.stubGlobal('fetch', fetchMock);
    renderWithLive(<AdminPage />);
    expect(await screen.findByRole('alert')).toHaveTextContent('Only administrators manage users and tokens.');
    const paths = fetchMock.mock.calls.map(([r]) => new URL(r.url).pathname);
    expect(paths).toEqual(['/api/v1/auth/me']);
    expect(fetchMock.mock.calls[0]?.[0].headers.get('Authorization')).toBe('Bearer viewer-jwt');
  });
});
