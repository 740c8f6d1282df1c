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

export function AuthProvider({ children }: { children: ReactNode }) {
  const [token, setToken] = useState<string | null>(() => tokenStore.get());
  const qc = useQueryClient();

  const logout = useCallback(() => {
    tokenStore.set(null);
    setToken(null);
    qc.clear();
  }, [qc]);

  useEffect(() => tokenStore.onUnauthorized(() => { setToken(null); }), []);

  const login = useCallback(async (username: string, password: string) => {
    const res = await api.login(username, password);
    tokenStore.set(res.access_token);
    setToken(res.access_token);
  }, []);

  const meQuery = useQuery({ queryKey: ['me', token], queryFn: api.me, enabled: token != null, staleTime: 60_000 });

  const value = useMemo(() => ({ token, me: meQuery.data, login, logout }), [token, meQuery.data, login, logout]);
  return <Ctx.Provider value={value}>{children}</Ctx.Provider>;
}

export function useAuth(): AuthCtx {
  const v = useContext(Ctx);
  if (!v) throw new Error('useAuth outside AuthProvider');
  return v;
}
