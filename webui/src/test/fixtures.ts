// Realistic rows for component tests, shaped as the server returns them.
import type { EventItem, SessionSummary } from '../api/types';

export function makeSession(i: number, over: Partial<SessionSummary> = {}): SessionSummary {
  return {
    id: i,
    session_key: `call-${i}@198.18.1.10;ft${i}`,
    call_id: `call-${i}@198.18.1.10`,
    from_tag: `ft${i}`,
    to_tag: `tt${i}`,
    state: 'active',
    offloaded: i % 4 !== 0,
    offload_reason: i % 4 === 0 ? 'table full' : null,
    codec: 'PCMU',
    switch: 'sw1',
    agent: 'agent-1',
    caller: `198.18.1.10:${String(6000 + 2 * i)}`,
    callee: `198.18.2.10:${String(7000 + 2 * i)}`,
    started_at: '2026-01-01T00:00:00Z',
    answered_at: '2026-01-01T00:00:01Z',
    ended_at: null,
    packets: 1000 + i,
    bytes: null,
    lost: i % 10,
    mos_avg: 3 + (i % 15) / 10,
    mos_min: 3,
    jitter_ms_max: (i % 7) * 0.5,
    ...over,
  };
}

export function makeEvent(i: number, type: string, payload: Record<string, unknown>, ts = '2026-01-01T00:00:05Z'): EventItem {
  return {
    id: i, event_id: `ev-${String(i).padStart(8, '0')}`, type, ts, severity: 'warning',
    session_id: null, session_key: null, switch: 'sw1', agent: null, message: null, payload,
  };
}
