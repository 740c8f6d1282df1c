import { describe, expect, it } from 'vitest';
import type { EventItem } from '../api/types';
import { iredByPort, latestReroutes } from './congestionControl';

let n = 0;
const ev = (type: string, ts: string, sw: string | null, payload: Record<string, unknown>): EventItem => ({
  id: ++n, event_id: `e${String(n)}`, type, ts, severity: 'info', session_id: null, session_key: null,
  switch: sw, agent: null, message: null, payload,
});

describe('congestion control figures', () => {
  it('lists reroutes newest first, at most n, with their paths', () => {
    const rows = latestReroutes([
      ev('reroute', '2026-01-01T00:00:01Z', 's1', { flow: '198.18.2.0/24', direction: 'to_backup', from_path: 'port 7', to_path: 'nexthop 8 (port 8)', trigger: 'q' }),
      ev('ired_drop', '2026-01-01T00:00:02Z', 's1', { dev_port: 7, drops: 3 }),
      ev('reroute', '2026-01-01T00:00:09Z', 's1', { flow: '198.18.2.0/24', direction: 'to_primary', from_path: 'nexthop 8 (port 8)', to_path: 'port 7' }),
      ev('reroute', '2026-01-01T00:00:05Z', null, {}),
    ], 2);
    expect(rows.map((r) => r.direction)).toEqual(['to_primary', '–']);
    expect(rows[0]).toMatchObject({ switch: 's1', from: 'nexthop 8 (port 8)', to: 'port 7', trigger: '–' });
    expect(rows[1]?.switch).toBe('?');
  });

  it("sums iRED's drops and spared packets per switch port, ignoring bad counts", () => {
    const ports = iredByPort([
      ev('ired_drop', '2026-01-01T00:00:01Z', 's1', { dev_port: 7, drops: 10, spared: 4 }),
      ev('ired_drop', '2026-01-01T00:00:03Z', 's1', { dev_port: 7, drops: 5, spared: -2 }),
      ev('ired_drop', '2026-01-01T00:00:02Z', 's2', { dev_port: 7, drops: 'x' }),
      ev('ired_drop', '2026-01-01T00:00:02Z', 's1', { drops: 9 }),
      ev('reroute', '2026-01-01T00:00:02Z', 's1', { dev_port: 7, drops: 9 }),
    ]);
    expect(ports).toEqual([
      { key: 's1 port 7', switch: 's1', devPort: 7, drops: 15, spared: 4, last: '2026-01-01T00:00:03Z' },
      { key: 's2 port 7', switch: 's2', devPort: 7, drops: 0, spared: 0, last: '2026-01-01T00:00:02Z' },
    ]);
  });
});
