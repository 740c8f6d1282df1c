// Who is logged in. The token lives in localStorage (a wall screen survives a
// reload); any 401 from the API logs out and the router shows the login page.
import { createContext, useCallback, useContext, useEffect, useMemo, useState, type ReactNode } from 'react';
import { useQuery, useQueryClient } from '@tanstack/react-query';
import { api } from './endpoints';
import { tokenStore } from './http';
import type { Me } from './types';

interface AuthCtx {
  token: string | null;
  me: Me | undefined;
  login: (username: string, password: string) => Promise<void>;
  logout: () => void;
}

const Ctx = createContext<AuthCtx | null>(null);

const REFRESH_LEAD_MS = 60_000;
const REFRESH_MIN_MS = 5_000;
const REFRESH_RETRY_MS = 10_000;

export function AuthProvider({ children }: { children: ReactNode }) {
  const [token, setToken] = useState<string | null>(() => tokenStore.get());
  const qc = useQueryClient();

  const logout = useCallback(() => {
    // The server ends the login too (a stolen copy of the token stops working).
    const current = tokenStore.get();
    if (current) void api.logout(current).catch(() => undefined);
    tokenStore.set(null);
    setToken(null);
    qc.clear();
  }, [qc]);

  useEffect(() => tokenStore.onUnauthorized(() => { setToken(null); }), []);

  const login = useCallback(async (username: string, password: string) => {
    const res = await api.login(username, password);
    tokenStore.set(res.access_token, res.expires_at);
    setToken(res.access_token);
  }, []);

  // Logins are short-lived: swap the token for a fresh one a minute before it
  // expires (after 5 s when its expiry is unknown); a refused refresh is a 401,
  // which logs out. A failed one (server away) is retried in 10 s.
  useEffect(() => {
    if (!token) return;
    let timer: ReturnType<typeof setTimeout> | undefined;
    let stopped = false;
    const schedule = (ms: number) => { timer = setTimeout(run, Math.max(0, ms)); };
    const run = () => {
      api.refresh().then(
        (res) => {
          if (stopped || tokenStore.get() !== token) return;
          tokenStore.set(res.access_token, res.expires_at);
          setToken(res.access_token);
        },
        () => { if (!stopped) schedule(REFRESH_RETRY_MS); },
      );
    };
    const exp = tokenStore.expiresAt();
    schedule(exp == null ? REFRESH_MIN_MS : Math.max(REFRESH_MIN_MS, exp - Date.now() - REFRESH_LEAD_MS));
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, [token]);

  const meQuery = useQuery({ queryKey: ['me', token], queryFn: api.me, enabled: token != null, staleTime: 60_000 });

  const value = useMemo(() => ({ token, me: meQuery.data, login, logout }), [token, meQuery.data, login, logout]);
  return <Ctx.Provider value={value}>{children}</Ctx.Provider>;
}

export function useAuth(): AuthCtx {
  const v = useContext(Ctx);
  if (!v) throw new Error('useAuth outside AuthProvider');
  return v;
}
