// One WebSocket per console: the live session table, the header summary and
// the event/queue views all read from it. Reconnects with backoff and
// re-fetches the snapshot after every (re)connect so no delta is lost.
import {
  createContext, useContext, useEffect, useMemo, useRef, useState, useSyncExternalStore, type ReactNode,
} from 'react';
import { useQueryClient } from '@tanstack/react-query';
import { useAuth } from './auth';
import { api } from './endpoints';
import { LiveSessionStore } from './liveStore';
import { parseLiveMessage, type LiveMessage } from './liveMessages';
import type { EventItem, SessionSummary } from './types';

export type LiveStatus = 'connecting' | 'live' | 'reconnecting' | 'offline';

type RawListener = (m: LiveMessage) => void;

export interface LiveCtx {
  store: LiveSessionStore;
  status: LiveStatus;
  /** Open congestion episodes keyed by switch/port (onset seen, clear not yet). */
  congestion: Map<string, EventItem>;
  onMessage: (fn: RawListener) => () => void;
}

/** Exported so component tests can supply a store without a socket. */
export const LiveContext = createContext<LiveCtx | null>(null);
const Ctx = LiveContext;

const SNAPSHOT_PAGE = 1000;

async function loadActiveSessions(): Promise<SessionSummary[]> {
  const all: SessionSummary[] = [];
  let cursor: string | undefined;
  // Keyset pages until the server says there are no more.
  for (;;) {
    const page = await api.sessions({ state: 'active', limit: SNAPSHOT_PAGE, cursor });
    all.push(...page.items);
    if (!page.next_cursor) return all;
    cursor = page.next_cursor;
  }
}

export function congestionKey(e: EventItem): string {
  const port = e.payload.port;
  return `${e.switch ?? '?'}/${typeof port === 'number' || typeof port === 'string' ? String(port) : '?'}`;
}

export function LiveProvider({ children }: { children: ReactNode }) {
  const { token } = useAuth();
  const qc = useQueryClient();
  const [store] = useState(() => new LiveSessionStore());
  const [status, setStatus] = useState<LiveStatus>('connecting');
  const [congestion, setCongestion] = useState<Map<string, EventItem>>(() => new Map());
  const listeners = useRef(new Set<RawListener>());

  useEffect(() => {
    if (!token) return;
    let ws: WebSocket | null = null;
    let stopped = false;
    let attempt = 0;
    let retry: ReturnType<typeof setTimeout> | undefined;

    const handle = (m: LiveMessage) => {
      switch (m.kind) {
        case 'session':
          store.upsert(m.session);
          break;
        case 'session_removed':
          store.remove(m.id);
          break;
        case 'event':
          if (m.event.kind === 'congestion_onset' || m.event.kind === 'congestion_clear') {
            const key = congestionKey(m.event);
            const ev = m.event;
            setCongestion((prev) => {
              const next = new Map(prev);
              if (ev.kind === 'congestion_onset') next.set(key, ev);
              else next.delete(key);
              return next;
            });
          }
          void qc.invalidateQueries({ queryKey: ['events'] });
          break;
        default:
          break;
      }
      listeners.current.forEach((fn) => { fn(m); });
    };

    const connect = () => {
      setStatus(attempt === 0 ? 'connecting' : 'reconnecting');
      ws = new WebSocket(api.liveUrl(token));
      ws.onopen = () => {
        attempt = 0;
        setStatus('live');
        loadActiveSessions().then(
          (rows) => { store.replaceAll(rows); },
          (e: unknown) => { console.error('live: snapshot failed', e); },
        );
      };
      ws.onmessage = (ev: MessageEvent<string>) => {
        const parsed = parseLiveMessage(ev.data);
        if (parsed instanceof Error) {
          console.warn(parsed.message);
          return;
        }
        parsed.forEach(handle);
      };
      ws.onclose = () => {
        if (stopped) return;
        setStatus('reconnecting');
        attempt += 1;
        retry = setTimeout(connect, Math.min(10_000, 500 * 2 ** Math.min(attempt, 5)));
      };
    };
    connect();
    return () => {
      stopped = true;
      clearTimeout(retry);
      ws?.close();
      setStatus('offline');
    };
  }, [token, store, qc]);

  useEffect(() => () => { store.dispose(); }, [store]);

  const value = useMemo<LiveCtx>(
    () => ({
      store, status, congestion,
      onMessage: (fn) => {
        listeners.current.add(fn);
        return () => listeners.current.delete(fn);
      },
    }),
    [store, status, congestion],
  );
  return <Ctx.Provider value={value}>{children}</Ctx.Provider>;
}

export function useLive(): LiveCtx {
  const v = useContext(Ctx);
  if (!v) throw new Error('useLive outside LiveProvider');
  return v;
}

/** The live session rows; re-renders at most once per store flush. */
export function useLiveSessions(): SessionSummary[] {
  const { store } = useLive();
  return useSyncExternalStore(store.subscribe, store.getRows);
}
