import { act, render, screen } from '@testing-library/react';
import { QueryClientProvider } from '@tanstack/react-query';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { makeQueryClient } from '../App';
import { AuthProvider, useAuth } from './auth';
import { tokenStore } from './http';

const json = (body: unknown, status = 200) =>
  Promise.resolve(new Response(JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json' } }));

function Probe() {
  const { token, logout } = useAuth();
  return <button type="button" onClick={logout}>{token ?? 'logged out'}</button>;
}

let calls: { path: string; auth: string | null }[];
let refreshStatus = 200;

beforeEach(() => {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
  calls = [];
  refreshStatus = 200;
  vi.stubGlobal('fetch', vi.fn((req: Request) => {
    const path = new URL(req.url).pathname;
    calls.push({ path, auth: req.headers.get('Authorization') });
    if (path === '/api/v1/auth/refresh') {
      return refreshStatus === 200
        ? json({ access_token: 'jwt-2', token_type: 'bearer', expires_at: new Date(Date.now() + 900_000).toISOString(), role: 'viewer' })
        : json({ detail: 'login expired' }, refreshStatus);
    }
    if (path === '/api/v1/auth/logout') return Promise.resolve(new Response(null, { status: 204 }));
    if (path === '/api/v1/auth/me') return json({ kind: 'user', id: 1, name: 'noc', role: 'viewer', scope: null });
    return json({ detail: 'not found' }, 404);
  }));
});

afterEach(() => {
  vi.useRealTimers();
  vi.unstubAllGlobals();
  localStorage.clear();
});

function mount() {
  render(<QueryClientProvider client={makeQueryClient()}><AuthProvider><Probe /></AuthProvider></QueryClientProvider>);
}

describe('AuthProvider', () => {
  it('swaps the login token for a fresh one a minute before it expires', async () => {
    tokenStore.set('jwt-1', new Date(Date.now() + 120_000).toISOString());
    mount();
    await act(async () => { await vi.advanceTimersByTimeAsync(59_000); });
    expect(calls.filter((c) => c.path === '/api/v1/auth/refresh')).toEqual([]);
    await act(async () => { await vi.advanceTimersByTimeAsync(2_000); });
    expect(calls.filter((c) => c.path === '/api/v1/auth/refresh')).toEqual([{ path: '/api/v1/auth/refresh', auth: 'Bearer jwt-1' }]);
    expect(screen.getByRole('button').textContent).toBe('jwt-2');
    expect(tokenStore.get()).toBe('jwt-2');
    expect(tokenStore.expiresAt()).toBeGreaterThan(Date.now() + 800_000);
  });

  it('logs out when the refresh is refused', async () => {
    refreshStatus = 401;
    tokenStore.set('jwt-1'); // expiry unknown: refreshed after 5 s
    mount();
    await act(async () => { await vi.advanceTimersByTimeAsync(4_000); });
    expect(screen.getByRole('button').textContent).toBe('jwt-1');
    await act(async () => { await vi.advanceTimersByTimeAsync(1_500); });
    expect(screen.getByRole('button').textContent).toBe('logged out');
    expect(tokenStore.get()).toBeNull();
  });

  it('ends the login on the server when the operator logs out', async () => {
    tokenStore.set('jwt-1', new Date(Date.now() + 600_000).toISOString());
    mount();
    act(() => { screen.getByRole('button').click(); });
    await act(async () => { await vi.advanceTimersByTimeAsync(10); });
    expect(calls).toContainEqual({ path: '/api/v1/auth/logout', auth: 'Bearer jwt-1' });
    expect(screen.getByRole('button').textContent).toBe('logged out');
  });
});
