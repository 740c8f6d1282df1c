import { describe, expect, it } from 'vitest';
import type { EventItem } from '../api/types';
import { congestionSeenAt, iredByPort, latestReroutes } from './congestionControl';

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

  it('names where the congestion behind a move was seen: the INT hop, else the own port', () => {
    const int = ev('reroute', '2026-01-01T00:00:01Z', 's1', {
      flow: '198.18.2.0/24', direction: 'to_backup', from_path: 'port 4', to_path: 'nexthop 3 port 3',
      detected_by: 'int_control_plane', hop_switch: 's3', hop_port: 2,
    });
    expect(congestionSeenAt(int)).toBe('s3 port 2 (INT)');
    expect(latestReroutes([int], 1)[0]?.seenAt).toBe('s3 port 2 (INT)');
    const local = ev('reroute', '2026-01-01T00:00:02Z', 's1', { direction: 'to_backup', from_path: 'port 7' });
    expect(congestionSeenAt(local)).toBe('s1 port 7');
    const back = ev('reroute', '2026-01-01T00:00:03Z', 's1', { direction: 'to_primary', from_path: 'x', hop_switch: 's3', hop_port: 2 });
    expect(congestionSeenAt(back)).toBe('–');
    // a hop port that is not a number is not a hop
    const bad = ev('reroute', '2026-01-01T00:00:04Z', null, { direction: 'to_backup', hop_switch: 's3', hop_port: '2', from_path: 'port 7' });
    expect(congestionSeenAt(bad)).toBe('? port 7');
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
