import { describe, expect, it } from 'vitest';
import { eventSummary, qualityCharts, seriesBy, timelineOption } from './chartOptions';
import type { EventItem, QualitySample } from '../api/types';

const q = (ts: string, direction: string, mos: number | null, loss = 0): QualitySample => ({
  ts, direction, packets: 50, loss, jitter_ms: 1, delay_ms: null, mos,
});

describe('seriesBy', () => {
  it('groups per key, sorts by time, keeps gaps as null', () => {
    const s = seriesBy(
      [q('2026-01-01T00:00:02Z', 'a→b', 4.1), q('2026-01-01T00:00:01Z', 'a→b', null), q('2026-01-01T00:00:01Z', 'b→a', 4.3)],
      (x) => x.direction,
      (x) => x.mos,
    );
    expect(s.map((x) => x.name)).toEqual(['a→b', 'b→a']);
    expect(s[0]?.points).toEqual([[Date.parse('2026-01-01T00:00:01Z'), null], [Date.parse('2026-01-01T00:00:02Z'), 4.1]]);
  });
  it('skips samples with a bad timestamp', () => {
    expect(seriesBy([q('nope', 'x', 1)], (x) => x.direction, (x) => x.mos)).toEqual([]);
  });
});

describe('qualityCharts', () => {
  it('plots loss in percent and marks MOS 3.6', () => {
    const o = qualityCharts([q('2026-01-01T00:00:01Z', 'a→b', 4, 0.02)]);
    const loss = (o.loss.series as { data: [number, number][] }[])[0];
    expect(loss?.data[0]?.[1]).toBeCloseTo(2);
    const mos = (o.mos.series as { markLine?: { data: { yAxis: number }[] } }[])[0];
    expect(mos?.markLine?.data[0]?.yAxis).toBe(3.6);
  });
});

describe('timeline', () => {
  const reroute: EventItem = {
    id: 'e1', ts: '2026-01-01T00:00:05Z', kind: 'reroute', severity: 'warning', session_id: null, switch: 'sw1',
    payload: { flow: '198.18.1.10:20000→198.18.2.10:30000', from_path: 'p1', to_path: 'p2', trigger: 'queue delay' },
  };
  it('describes a reroute with flow, paths and trigger', () => {
    expect(eventSummary(reroute)).toBe('flow 198.18.1.10:20000→198.18.2.10:30000: p1 → p2 (queue delay)');
  });
  it('puts each event kind on its own row', () => {
    const o = timelineOption([reroute, { ...reroute, id: 'e2', kind: 'congestion_onset', payload: { port: 3 } }]);
    expect((o.yAxis as { data: string[] }).data).toEqual(['congestion_onset', 'reroute']);
    expect((o.series as { data: unknown[] }[])[0]?.data).toHaveLength(2);
  });
});
