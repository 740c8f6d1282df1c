// Every server endpoint the console calls, in one place. Paths and payloads
// follow the server's OpenAPI (server/openapi.json → schema.d.ts).
import { apiFetch, apiJson, query } from './http';
import type {
  ApiToken, CreatedToken, EventItem, Me, Page, QueueSample, Role, SessionDetail, SessionSummary, SwitchInfo, User,
} from './types';

const V1 = '/api/v1';

export interface SessionFilters {
  since?: string;
  until?: string;
  state?: string;
  offloaded?: boolean;
  mos_min?: number;
  mos_max?: number;
  call_id?: string;
  address?: string;
  switch?: string;
  cursor?: string;
  limit?: number;
}

export interface EventFilters {
  kind?: string;
  since?: string;
  until?: string;
  session_id?: string;
  switch?: string;
  limit?: number;
  cursor?: string;
}

export const api = {
  login: (username: string, password: string) =>
    apiJson<{ access_token: string; token_type: string }>(`${V1}/auth/login`, {
      method: 'POST',
      body: JSON.stringify({ username, password }),
    }),
  me: () => apiJson<Me>(`${V1}/auth/me`),

  sessions: (f: SessionFilters) => apiJson<Page<SessionSummary>>(`${V1}/sessions${query({ ...f })}`),
  session: (id: string) => apiJson<SessionDetail>(`${V1}/sessions/${encodeURIComponent(id)}`),
  sessionsCsv: (f: SessionFilters) => apiFetch(`${V1}/sessions.csv${query({ ...f, cursor: undefined })}`),

  events: (f: EventFilters) => apiJson<Page<EventItem>>(`${V1}/events${query({ ...f })}`),

  switches: () => apiJson<SwitchInfo[]>(`${V1}/switches`),
  queueSeries: (switchId: string, since: string, resolution_s: number) =>
    apiJson<QueueSample[]>(
      `${V1}/switches/${encodeURIComponent(switchId)}/queues${query({ since, resolution_s })}`,
    ),

  users: () => apiJson<User[]>(`${V1}/users`),
  createUser: (username: string, password: string, role: Role) =>
    apiJson<User>(`${V1}/users`, { method: 'POST', body: JSON.stringify({ username, password, role }) }),
  deleteUser: (id: string) => apiJson<undefined>(`${V1}/users/${encodeURIComponent(id)}`, { method: 'DELETE' }),

  tokens: () => apiJson<ApiToken[]>(`${V1}/tokens`),
  createToken: (name: string, scope: string) =>
    apiJson<CreatedToken>(`${V1}/tokens`, { method: 'POST', body: JSON.stringify({ name, scope }) }),
  revokeToken: (id: string) => apiJson<undefined>(`${V1}/tokens/${encodeURIComponent(id)}`, { method: 'DELETE' }),

  /** WebSocket URL of the live feed (same origin; token as a query parameter since browsers cannot set headers). */
  liveUrl: (token: string) => {
    const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
    return `${proto}//${location.host}${V1}/live${query({ token })}`;
  },
};
