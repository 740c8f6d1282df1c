// Every server call the console makes, type-checked against the OpenAPI schema.
import { client, unwrap } from './client';
import { apiFetch } from './http';
import type { AgentMode, EventQuery, Role, Scope, SessionQuery, SwitchMaintenanceSet } from './types';

export const api = {
  login: (username: string, password: string) =>
    unwrap(client.POST('/api/v1/auth/login', { body: { username, password } })),
  me: () => unwrap(client.GET('/api/v1/auth/me')),
  /** A fresh login token for the current one (until 12 h after the login). */
  refresh: () => unwrap(client.POST('/api/v1/auth/refresh')),
  /** Ends every login of this user on the server. */
  logout: (token: string) =>
    unwrap(client.POST('/api/v1/auth/logout', { headers: { Authorization: `Bearer ${token}` } })),

  sessions: (query: SessionQuery) => unwrap(client.GET('/api/v1/sessions', { params: { query } })),
  session: (id: number) => unwrap(client.GET('/api/v1/sessions/{session_id}', { params: { path: { session_id: id } } })),
  /** CSV with the list's filters; fetched with the token, saved as a file by the page. */
  sessionsCsv: (query: SessionQuery) => {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(query)) {
      if (v == null || k === 'cursor' || k === 'limit') continue;
      if (Array.isArray(v)) v.forEach((x: unknown) => { q.append(k, String(x)); });
      else q.set(k, String(v));
    }
    return apiFetch(`/api/v1/sessions/export.csv?${q.toString()}`);
  },

  events: (query: EventQuery) => unwrap(client.GET('/api/v1/events', { params: { query } })),

  switches: () => unwrap(client.GET('/api/v1/switches')),
  queueSeries: (switchId: number, from: string, resolution_s: number) =>
    unwrap(client.GET('/api/v1/switches/{switch_id}/queues', {
      params: { path: { switch_id: switchId }, query: { from, resolution_s } },
    })),

  /** Every switch's queues, one series per hop (switch, port, queue). */
  hopSeries: (from: string, resolution_s: number) =>
    unwrap(client.GET('/api/v1/queues', { params: { query: { from, resolution_s } } })),

  agents: () => unwrap(client.GET('/api/v1/agents')),
  /** Maintenance state and capacity figures of every switch and its agents. */
  maintenance: () => unwrap(client.GET('/api/v1/maintenance')),
  /** Out of service (its calls evacuated to RTPProxy) or active; the offload cap (operator role). */
  setSwitchMaintenance: (switchId: number, body: SwitchMaintenanceSet) =>
    unwrap(client.PUT('/api/v1/maintenance/switches/{switch_id}', {
      params: { path: { switch_id: switchId } }, body,
    })),
  /** Drain, evacuate or resume one agent (operator role). */
  setAgentMaintenance: (agentId: number, state: AgentMode) =>
    unwrap(client.PUT('/api/v1/maintenance/agents/{agent_id}', {
      params: { path: { agent_id: agentId } }, body: { state },
    })),
  congestion: (query: { since?: string; until?: string; switch?: string; open_only?: boolean }) =>
    unwrap(client.GET('/api/v1/congestion', { params: { query } })),
  activity: (from: string, step_s: number) =>
    unwrap(client.GET('/api/v1/overview/activity', { params: { query: { from, step_s } } })),

  users: () => unwrap(client.GET('/api/v1/users')),
  createUser: (username: string, password: string, role: Role) =>
    unwrap(client.POST('/api/v1/users', { body: { username, password, role } })),
  updateUser: (id: number, body: { role?: Role; disabled?: boolean; password?: string }) =>
    unwrap(client.PATCH('/api/v1/users/{user_id}', { params: { path: { user_id: id } }, body })),

  tokens: () => unwrap(client.GET('/api/v1/tokens')),
  createToken: (name: string, scope: Scope) => unwrap(client.POST('/api/v1/tokens', { body: { name, scope } })),
  revokeToken: (id: number) =>
    unwrap(client.DELETE('/api/v1/tokens/{token_id}', { params: { path: { token_id: id } } })),

  /** The live WebSocket (same origin; token as a query parameter since browsers cannot set headers). */
  liveUrl: (token: string) => {
    const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
    return `${proto}//${location.host}/api/v1/live?token=${encodeURIComponent(token)}`;
  },
};
