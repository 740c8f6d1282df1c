// Domain types the console uses. PROVISIONAL until server/openapi.json lands:
// then every type here becomes an alias of the generated schema (schema.d.ts).

export type Role = 'viewer' | 'admin';

export interface Me {
  username: string;
  role: Role;
}

export interface SessionSummary {
  id: string;
  call_id: string;
  from_tag: string | null;
  to_tag: string | null;
  state: string;
  offloaded: boolean;
  offload_reason: string | null;
  caller: string | null;
  callee: string | null;
  switch: string | null;
  started_at: string;
  answered_at: string | null;
  ended_at: string | null;
  packets: number | null;
  loss: number | null;
  jitter_ms: number | null;
  mos: number | null;
}

export interface Leg {
  direction: string;
  src_addr: string; src_port: number;
  dst_addr: string; dst_port: number;
  relay_addr: string | null; relay_port: number | null;
}

export interface RewriteEntry {
  match: string;
  action: string;
  installed_at: string | null;
  removed_at: string | null;
}

export interface QualitySample {
  ts: string;
  direction: string;
  packets: number;
  loss: number | null;
  jitter_ms: number | null;
  delay_ms: number | null;
  mos: number | null;
}

export interface EventItem {
  id: string;
  ts: string;
  kind: string;
  severity: string;
  session_id: string | null;
  switch: string | null;
  payload: Record<string, unknown>;
}

export interface SessionDetail extends SessionSummary {
  legs: Leg[];
  entries: RewriteEntry[];
  quality: QualitySample[];
  events: EventItem[];
}

export interface Page<T> {
  items: T[];
  next_cursor: string | null;
}

export interface SwitchInfo {
  id: string;
  name: string;
  relay_table_capacity: number | null;
  relay_table_used: number | null;
  ports: { port: number; name: string | null }[];
}

export interface QueueSample {
  ts: string;
  port: number;
  depth: number | null;
  delay_us: number | null;
  utilisation: number | null;
  drops_tail: number | null;
  drops_ired: number | null;
}

export interface User {
  id: string;
  username: string;
  role: Role;
  created_at: string;
}

export interface ApiToken {
  id: string;
  name: string;
  scope: string;
  created_at: string;
  last_used_at: string | null;
  revoked: boolean;
}

export interface CreatedToken extends ApiToken {
  token: string;
}
