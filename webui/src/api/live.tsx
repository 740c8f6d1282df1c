// One WebSocket per console: the live session table, the header summary and
// the switch/event views all read from it. Reconnects with backoff and
// re-fetches the snapshot after every (re)connect, so no change is lost.
import {
  createContext, useContext, useEffect, useMemo, useRef, useState, useSyncExternalStore, type ReactNode,
} from 'react';
import { useQueryClient } from '@tanstack/react-query';
import { useAuth } from './auth';
import { api } from './endpoints';
import { LiveSessionStore } from './liveStore';
import { parseLiveMessage, type LiveMessage } from './liveMessages';
import type { CongestionEpisode, LiveSession, SessionSummary } from './types';
import { applyCongestion, fromEpisodes, type OpenEpisode } from '../lib/congestion';

export type LiveStatus = 'connecting' | 'live' | 'reconnecting' | 'offline';

type RawListener = (m: LiveMessage) => void;

export interface LiveCtx {
  store: LiveSessionStore;
  status: LiveStatus;
  /** Open congestion episodes keyed by switch/port/queue (onset seen, clear not yet). */
  congestion: ReadonlyMap<string, OpenEpisode>;
  onMessage: (fn: RawListener) => () => void;
}

/** Exported so component tests can supply a store without a socket. */
export const LiveContext = createContext<LiveCtx | null>(null);

const SNAPSHOT_PAGE = 500;

async function loadActiveSessions(): Promise<SessionSummary[]> {
  const all: SessionSummary[] = [];
  let cursor: string | undefined;
  for (;;) {
    const page = await api.sessions({ state: ['active', 'setup'], limit: SNAPSHOT_PAGE, cursor });
    all.push(...page.items);
    if (!page.next_cursor) return all;
    cursor = page.next_cursor;
  }
}

/** Episodes open now, however long ago they began (the server pairs onsets and clears). */
async function loadCongestion(): Promise<CongestionEpisode[]> {
  return api.congestion({ since: new Date(Date.now() - 1000).toISOString(), open_only: true });
}

export function LiveProvider({ children }: { children: ReactNode }) {
  const { token } = useAuth();
  const qc = useQueryClient();
  const [store] = useState(() => new LiveSessionStore());
  const [status, setStatus] = useState<LiveStatus>('connecting');
  const [congestion, setCongestion] = useState<ReadonlyMap<string, OpenEpisode>>(() => new Map());
  const listeners = useRef(new Set<RawListener>());

  useEffect(() => {
    if (!token) return;
    let ws: WebSocket | null = null;
    let stopped = false;
    let attempt = 0;
    let retry: ReturnType<typeof setTimeout> | undefined;

    const handle = (m: LiveMessage) => {
      switch (m.topic) {
        case 'sessions':
          m.items.forEach((s) => { store.upsert(s); });
          break;
        case 'samples':
          m.items.forEach((q) => { store.applySample(q); });
          break;
        case 'events':
          setCongestion((prev) => applyCongestion(prev, m.items));
          void qc.invalidateQueries({ queryKey: ['events'] });
          break;
        default:
          break;
      }
      listeners.current.forEach((fn) => { fn(m); });
    };

    const resync = () => {
      loadActiveSessions().then(
        (rows) => { store.replaceAll(rows); },
        (e: unknown) => { console.error('live: session snapshot failed', e); },
      );
      loadCongestion().then(
        (episodes) => { setCongestion(fromEpisodes(episodes)); },
        (e: unknown) => { console.error('live: congestion snapshot failed', e); },
      );
    };

    const connect = () => {
      setStatus(attempt === 0 ? 'connecting' : 'reconnecting');
      ws = new WebSocket(api.liveUrl(token));
      ws.onmessage = (ev: MessageEvent<string>) => {
        const m = parseLiveMessage(ev.data);
        if (m instanceof Error) {
          console.warn(m.message);
          return;
        }
        if (m.topic === 'hello') {
          // Subscribed: changes from now on reach us, so the snapshot misses nothing.
          attempt = 0;
          setStatus('live');
          resync();
          return;
        }
        handle(m);
      };
      ws.onclose = (ev: CloseEvent) => {
        if (stopped) return;
        // 1008: the server refused our token (expired, user disabled). Asking
        // who-am-I gets the 401 that logs the console out.
        // 4401: the login behind this socket expired or was revoked: the same
        // question tells a refreshed console to go on and a revoked one to log out.
        if (ev.code === 1008 || ev.code === 4401) void api.me().catch(() => undefined);
        setStatus('reconnecting');
        attempt += 1;
        retry = setTimeout(connect, Math.min(10_000, 250 * 2 ** Math.min(attempt, 6)));
      };
    };
    connect();
    return () => {
      stopped = true;
      clearTimeout(retry);
      ws?.close();
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
  return <LiveContext.Provider value={value}>{children}</LiveContext.Provider>;
}

export function useLive(): LiveCtx {
  const v = useContext(LiveContext);
  if (!v) throw new Error('useLive outside LiveProvider');
  return v;
}

/** The live session rows; re-renders at most once per store flush. */
export function useLiveSessions(): LiveSession[] {
  const { store } = useLive();
  return useSyncExternalStore(store.subscribe, store.getRows);
}
