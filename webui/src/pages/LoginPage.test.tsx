import { screen } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { afterEach, describe, expect, it, vi } from 'vitest';
import LoginPage from './LoginPage';
import { renderWithLive } from '../test/render';

afterEach(() => {
  vi.unstubAllGlobals();
});

describe('LoginPage', () => {
  it("shows the server's reason when the login is refused", async () => {
    const fetchMock = vi.fn(() =>
      Promise.resolve(new Response(JSON.stringify({ detail: 'wrong username or password' }), {
        status: 401, headers: { 'Content-Type': 'application/json' },
      })));
    vi.stubGlobal('fetch', fetchMock);
    const user = userEvent.setup();
    renderWithLive(<LoginPage />);
    await user.type(screen.getByLabelText('Username'), 'noc');
    await user.type(screen.getByLabelText('Password'), 'nope');
    await user.click(screen.getByRole('button', { name: 'Sign in' }));
    expect(await screen.findByRole('alert')).toHaveTextContent('wrong username or password');
    const req = (fetchMock.mock.calls[0] as unknown as [Request])[0];
    expect(req.url).toMatch(/\/api\/v1\/auth\/login$/);
    expect(await req.json()).toEqual({ username: 'noc', password: 'nope' });
  });

  it('stores the token and leaves the login page on success', async () => {
    vi.stubGlobal('fetch', vi.fn(() =>
      Promise.resolve(new Response(JSON.stringify({
        access_token: 'jwt-1', token_type: 'bearer', expires_at: '2026-01-01T12:00:00Z', role: 'viewer',
      }), { status: 200, headers: { 'Content-Type': 'application/json' } }))));
    const user = userEvent.setup();
    renderWithLive(<LoginPage />, { route: '/login', path: '/login' });
    await user.type(screen.getByLabelText('Username'), 'noc');
    await user.type(screen.getByLabelText('Password'), 'secret-password');
    await user.click(screen.getByRole('button', { name: 'Sign in' }));
    expect(await screen.findByText('elsewhere')).toBeInTheDocument();
    expect(localStorage.getItem('p4relay.token')).toBe('jwt-1');
  });
});
