import { act, render, screen } from '@testing-library/react';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { QueryClientProvider } from '@tanstack/react-query';
import { AuthProvider } from './auth';
import { LiveProvider, useLive, useLiveSessions } from './live';
import { makeQueryClient } from '../App';
import { makeEvent, makeSession } from '../test/fixtures';

/** A WebSocket the test drives: it records instances and lets the test deliver frames. */
class FakeSocket {
  static all: FakeSocket[] = [];
  onmessage: ((ev: MessageEvent<string>) => void) | null = null;
  onclose: ((ev: CloseEvent) => void) | null = null;
  closed = false;
  constructor(readonly url: string) {
    FakeSocket.all.push(this);
  }
  deliver(msg: unknown): void {
    this.onmessage?.({ data: JSON.stringify(msg) } as MessageEvent<string>);
  }
  serverClose(code: number): void {
    this.onclose?.({ code } as CloseEvent);
  }
  close(): void {
    this.closed = true;
  }
}

function Probe() {
  const rows = useLiveSessions();
  const { status, congestion } = useLive();
  return (
    <p data-testid="probe">
      {status}|{rows.map((r) => r.call_id).sort().join(',')}|{[...congestion.keys()].join(',')}
    </p>
  );
}

const json = (body: unknown, status = 200) =>
  Promise.resolve(new Response(JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json' } }));

let fetchMock: ReturnType<typeof vi.fn<(req: Request) => Promise<Response>>>;
let tokenValid = true;

beforeEach(() => {
  FakeSocket.all = [];
  tokenValid = true;
  vi.stubGlobal('WebSocket', FakeSocket);
  localStorage.setItem('p4relay.token', 'jwt-1');
  fetchMock = vi.fn((req: Request) => {
    const url = new URL(req.url);
    if (url.pathname === '/api/v1/sessions') return json({ items: [makeSession(1, { call_id: 'snap@x' })], next_cursor: null });
    if (url.pathname === '/api/v1/congestion') {
      // Open episodes only: an onset from days ago still counts.
      expect(url.searchParams.get('open_only')).toBe('true');
      return json([{
        switch: 'sw1', dev_port: 2, queue: 0, started_at: '2025-12-29T00:00:00Z', ended_at: null, onset_event_id: 9, queue_delay_us: 800_000,
      }]);
    }
    if (url.pathname === '/api/v1/auth/me') {
      return tokenValid
        ? json({ kind: 'user', id: 1, name: 'noc', role: 'viewer', scope: null })
        : json({ detail: 'missing, invalid or expired credentials' }, 401);
    }
    return json({ detail: 'not found' }, 404);
  });
  vi.stubGlobal('fetch', fetchMock);
});

afterEach(() => {
  vi.unstubAllGlobals();
  vi.useRealTimers();
});

function mount() {
  render(
    <QueryClientProvider client={makeQueryClient()}>
      <AuthProvider>
        <LiveProvider><Probe /></LiveProvider>
      </AuthProvider>
    </QueryClientProvider>,
  );
  const ws = FakeSocket.all[0];
  if (!ws) throw new Error('no socket opened');
  return ws;
}

describe('LiveProvider', () => {
  it('loads the snapshot on hello, then applies stream changes', async () => {
    const ws = mount();
    expect(ws.url).toMatch(/\/api\/v1\/live\?token=jwt-1$/);
    act(() => { ws.deliver({ topic: 'hello', topics: ['events', 'queues', 'samples', 'sessions'] }); });
    expect(await screen.findByText(/^live\|snap@x\|sw1 port 2$/)).toBeInTheDocument();
    const { id, session_key, offloaded, offload_reason, started_at, answered_at } = makeSession(2);
    act(() => {
      ws.deliver({
        topic: 'sessions',
        items: [{ id, session_key, call_id: 'new@x', state: 'active', offloaded, offload_reason, switch: 'sw1', started_at, answered_at, ended_at: null }],
      });
      ws.deliver({ topic: 'events', items: [makeEvent(10, 'congestion_clear', { dev_port: 2 }, '2026-01-01T00:01:00Z')] });
    });
    expect(await screen.findByText(/^live\|new@x,snap@x\|$/)).toBeInTheDocument();
  });

  it('ignores malformed frames', async () => {
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => undefined);
    const ws = mount();
    act(() => { ws.deliver({ topic: 'hello', topics: [] }); });
    await screen.findByText(/^live\|snap@x/);
    act(() => { ws.deliver({ topic: 'sessions', items: [{ id: 'x' }] }); });
    expect(warn).toHaveBeenCalledWith('live: sessions item: id must be a number');
    expect(screen.getByTestId('probe')).toHaveTextContent(/^live\|snap@x\|/);
  });

  it('reconnects after a drop and logs out when the token is refused', async () => {
    vi.useFakeTimers({ shouldAdvanceTime: true });
    const ws = mount();
    act(() => { ws.serverClose(1013); }); // overflow: try again
    expect(screen.getByTestId('probe')).toHaveTextContent(/^reconnecting/);
    await act(async () => { await vi.advanceTimersByTimeAsync(600); });
    expect(FakeSocket.all).toHaveLength(2);
    tokenValid = false; // e.g. the user was disabled
    act(() => { FakeSocket.all[1]?.serverClose(1008); });
    await vi.waitFor(() => { expect(localStorage.getItem('p4relay.token')).toBeNull(); });
    expect(fetchMock.mock.calls.some(([r]) => new URL(r.url).pathname === '/api/v1/auth/me')).toBe(true);
  });
});
