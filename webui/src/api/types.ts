// Domain types: aliases of the schema generated from the server's OpenAPI
// (`npm run gen:api` → schema.d.ts). The live WebSocket is not in OpenAPI, so
// its items are derived from the same generated types.
import type { components, operations } from './schema';

type S = components['schemas'];

export type Me = S['Me'];
export type Role = S['UserOut']['role'];
export type Scope = S['TokenOut']['scope'];
export type SessionState = S['SessionSummary']['state'];
export type Direction = S['LegOut']['direction'];
export type EventType = NonNullable<NonNullable<operations['list_events_api_v1_events_get']['parameters']['query']>['type']>[number];
export type Severity = NonNullable<EventQuery['severity']>;

export type SessionSummary = S['SessionSummary'];
export type SessionPage = S['SessionPage'];
export type SessionDetail = S['SessionDetail'];
export type Leg = S['LegOut'];
export type QualitySeries = S['QualitySeries'];
export type QualityPoint = S['QualityPoint'];
export type EventItem = S['EventOut'];
export type EventPage = S['EventPage'];
export type SwitchInfo = S['SwitchOut'];
export type SwitchMaintenance = S['SwitchMaintenance'];
export type AgentMaintenance = S['AgentMaintenance'];
export type AgentMode = S['AgentMaintenanceSet']['state'];
export type SwitchMaintenanceSet = S['SwitchMaintenanceSet'];
export type QueueSeries = S['QueueSeries'];
export type QueuePoint = S['QueuePoint'];
export type CongestionEpisode = S['CongestionEpisode'];
export type PathSegment = S['PathSegment'];
export type Activity = S['Activity'];
export type Agent = S['AgentOut'];
export type User = S['UserOut'];
export type ApiToken = S['TokenOut'];
export type CreatedToken = S['TokenCreated'];

export type SessionQuery = NonNullable<operations['list_sessions_api_v1_sessions_get']['parameters']['query']>;
export type EventQuery = NonNullable<operations['list_events_api_v1_events_get']['parameters']['query']>;

// ---- live stream items (server/src/p4relay_server/services/ingest.py) ----
export type LiveSessionItem = Pick<
  SessionSummary,
  'id' | 'session_key' | 'call_id' | 'state' | 'offloaded' | 'offload_reason' | 'switch' | 'started_at' | 'answered_at' | 'ended_at'
> & Partial<Pick<SessionSummary, 'caller' | 'callee' | 'one_way'>>;
export type LiveSampleItem = Pick<QualityPoint, 'ts' | 'packets' | 'lost' | 'loss_pct' | 'jitter_ms' | 'delay_ms' | 'mos'> & {
  session_id: number | null;
  session_key: string;
  direction: Direction;
};
export type LiveQueueItem = Pick<QueuePoint, 'ts' | 'utilisation' | 'drops' | 'depth_bytes' | 'ired_qavg_bytes'> & {
  switch: string;
  switch_id: number;
  dev_port: number;
  queue: number;
  depth_pkts: number | null;
  queue_delay_us: number | null;
};
export type LiveEventItem = Omit<EventItem, 'agent'> & Partial<Pick<EventItem, 'agent'>>;

/** A live-table row: the stored summary (its packets/lost are the server's
 * running counters, advanced here by each streamed sample) plus the latest
 * quality per direction. */
export interface LiveSession extends SessionSummary {
  live?: {
    /** Latest sample per direction. */
    dirs: Partial<Record<Direction, { mos: number | null; jitter_ms: number; loss_pct: number; ts: string }>>;
  };
}
