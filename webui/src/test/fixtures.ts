// Realistic session rows for component tests (shapes as the server returns them).
import type { SessionSummary } from '../api/types';

export function makeSession(i: number, over: Partial<SessionSummary> = {}): SessionSummary {
  return {
    id: `s${i}`,
    call_id: `call-${i}@198.18.1.10`,
    from_tag: `ft${i}`,
    to_tag: `tt${i}`,
    state: 'active',
    offloaded: i % 4 !== 0,
    offload_reason: i % 4 === 0 ? 'table full' : null,
    caller: `198.18.1.10:${20000 + (i % 9000)}`,
    callee: `198.18.2.10:${30000 + (i % 9000)}`,
    switch: 'sw1',
    started_at: '2026-01-01T00:00:00Z',
    answered_at: '2026-01-01T00:00:01Z',
    ended_at: null,
    packets: 1000 + i,
    loss: (i % 10) / 1000,
    jitter_ms: (i % 7) * 0.5,
    mos: 3 + (i % 15) / 10,
    ...over,
  };
}
