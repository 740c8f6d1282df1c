import { describe, expect, it } from 'vitest';
import { congestionEpisodes, eventSummary, hopName, pathOption, pathWhy, qualityCharts, queueCharts, seriesBy, timelineOption } from './chartOptions';
import type { PathSegment, QualityPoint, QualitySeries, QueueSeries } from '../api/types';
import { makeEvent } from '../test/fixtures';

const qp = (ts: string, mos: number | null, loss_pct = 0): QualityPoint => ({
  ts, packets: 50, lost: 0, loss_pct, jitter_ms: 1, delay_ms: null, mos, r_factor: null,
});

describe('seriesBy', () => {
  it('groups per key, sorts by time, keeps gaps as null', () => {
    const rows = [
      { ts: '2026-01-01T00:00:02Z', k: 'a', v: 4.1 },
      { ts: '2026-01-01T00:00:01Z', k: 'a', v: null },
      { ts: '2026-01-01T00:00:01Z', k: 'b', v: 4.3 },
    ];
    const s = seriesBy(rows, (x) => x.k, (x) => x.v);
    expect(s.map((x) => x.name)).toEqual(['a', 'b']);
    expect(s[0]?.points).toEqual([[Date.parse('2026-01-01T00:00:01Z'), null], [Date.parse('2026-01-01T00:00:02Z'), 4.1]]);
  });
  it('skips samples with a bad timestamp', () => {
    expect(seriesBy([{ ts: 'nope' }], () => 'x', () => 1)).toEqual([]);
  });
});

describe('qualityCharts', () => {
  it('draws one line per direction and marks MOS 3.6', () => {
    const series: QualitySeries[] = [
      { direction: 'caller_to_callee', resolution_s: 1, points: [qp('2026-01-01T00:00:01Z', 4, 2)] },
      { direction: 'callee_to_caller', resolution_s: 1, points: [qp('2026-01-01T00:00:01Z', 4.2)] },
    ];
    const o = qualityCharts(series);
    const loss = o.loss.series as { name: string; data: [number, number][] }[];
    expect(loss.map((l) => l.name)).toEqual(['caller → callee', 'callee → caller']);
    expect(loss[0]?.data[0]?.[1]).toBe(2);
    const mos = (o.mos.series as { markLine?: { data: { yAxis: number }[] } }[])[0];
    expect(mos?.markLine?.data[0]?.yAxis).toBe(3.6);
  });
  it('marks reroutes across the quality charts', () => {
    const series: QualitySeries[] = [{ direction: 'caller_to_callee', resolution_s: 1, points: [qp('2026-01-01T00:00:01Z', 4)] }];
    const reroute = makeEvent(1, 'reroute', { flow: 'f', from_path: 'a', to_path: 'b', trigger: 't' }, '2026-01-01T00:00:03Z');
    const o = qualityCharts(series, [reroute, makeEvent(2, 'offload_installed', {})]);
    const jitter = (o.jitter.series as { markLine?: { data: { xAxis?: number }[] } }[])[0];
    expect(jitter?.markLine?.data.map((d) => d.xAxis)).toEqual([Date.parse('2026-01-01T00:00:03Z')]);
  });
});

describe('queueCharts', () => {
  it('converts delay to ms, utilisation to % and adds iRED drops from events', () => {
    const series: QueueSeries[] = [{
      switch: 'sw1', dev_port: 3, queue: 0, resolution_s: 1,
      points: [{
        ts: '2026-01-01T00:00:01Z', depth_pkts: 10, depth_max_pkts: 12, depth_bytes: null,
        queue_delay_us: 2500, queue_delay_max_us: 3000, utilisation: 0.5, drops: 7,
      }],
    }];
    const o = queueCharts(series, [makeEvent(1, 'ired_drop', { dev_port: 3, drops: 4 }, '2026-01-01T00:00:01Z')]);
    const first = (opt: Record<string, unknown>) => (opt.series as { name: string; data: [number, number][] }[]);
    expect(first(o.delay)[0]?.data[0]?.[1]).toBe(2.5);
    expect(first(o.utilisation)[0]?.data[0]?.[1]).toBe(50);
    expect(first(o.drops).map((s) => s.name)).toEqual(['port 3 tail', 'port 3 iRED']);
  });
  it("draws iRED's queue average beside the depth of the ports that run iRED", () => {
    const pt = (ts: string, depth: number, qavg: number | null) => ({
      ts, depth_pkts: null, depth_max_pkts: null, depth_bytes: depth, queue_delay_us: null,
      queue_delay_max_us: null, utilisation: null, drops: 0, ired_qavg_bytes: qavg,
    });
    const series: QueueSeries[] = [
      { switch: 'sw1', dev_port: 2, queue: 0, resolution_s: 1, points: [pt('2026-01-01T00:00:01Z', 1024, null)] },
      {
        switch: 'sw1', dev_port: 3, queue: 0, resolution_s: 1,
        points: [pt('2026-01-01T00:00:01Z', 4096, 2048), pt('2026-01-01T00:00:02Z', 8192, 3072)],
      },
    ];
    const lines = queueCharts(series).depth.series as { name: string; data: [number, number][] }[];
    expect(lines.map((s) => s.name)).toEqual(['port 2', 'port 3', 'port 3 iRED avg']);
    expect(lines[2]?.data.map((d) => d[1])).toEqual([2, 3]);
    expect(lines[1]?.data.map((d) => d[1])).toEqual([4, 8]);
  });
});

describe('congestionEpisodes', () => {
  it('pairs onset and clear per port; an open episode runs to now', () => {
    const t = (s: number) => `2026-01-01T00:00:${String(s).padStart(2, '0')}Z`;
    const ev = [
      makeEvent(1, 'congestion_onset', { dev_port: 2 }, t(10)),
      makeEvent(2, 'congestion_onset', { dev_port: 3 }, t(5)),
      makeEvent(3, 'congestion_clear', { dev_port: 3 }, t(8)),
      makeEvent(4, 'congestion_clear', { dev_port: 4 }, t(9)), // clear without onset: ignored
    ];
    expect(congestionEpisodes(ev, Date.parse(t(30)))).toEqual([
      { from: Date.parse(t(5)), to: Date.parse(t(8)), label: 'port 3 congested' },
      { from: Date.parse(t(10)), to: Date.parse(t(30)), label: 'port 2 congested' },
    ]);
  });
});

describe('timeline', () => {
  const reroute = makeEvent(1, 'reroute', {
    flow: '198.18.1.10:20000→198.18.2.10:30000', from_path: 'p1', to_path: 'p2', trigger: 'queue delay',
  });
  it('describes a reroute with flow, paths and trigger', () => {
    expect(eventSummary(reroute)).toBe('flow 198.18.1.10:20000→198.18.2.10:30000: p1 → p2 (queue delay)');
  });
  it('puts each event type on its own row', () => {
    const o = timelineOption([reroute, makeEvent(2, 'congestion_onset', { dev_port: 3 })]);
    expect((o.yAxis as { data: string[] }).data).toEqual(['congestion_onset', 'reroute']);
    expect((o.series as { data: unknown[] }[])[0]?.data).toHaveLength(2);
  });
});

describe('call path', () => {
  const t = (s: number) => `2026-01-01T00:00:${String(s).padStart(2, '0')}Z`;
  const seg = (path: string, since: number, until: number | null, moved: number | null): PathSegment => ({
    switch: 's1', flow: '198.18.2.0/24', path, since: t(since), until: until == null ? null : t(until),
    reroute_event_id: moved, trigger: moved == null ? null : 'queue delay', source: 'reroute', hops: [],
  });
  const w = { from: Date.parse(t(0)), to: Date.parse(t(50)) };
  it('draws one row per path with a bar over each stretch, clipped to the window', () => {
    const o = pathOption([seg('port 7', 0, 10, null), seg('nexthop 8 port 8', 10, 40, 3), seg('port 7', 40, null, 4)], w, Date.parse(t(59)));
    expect((o.yAxis as { data: string[] }).data).toEqual(['s1 · port 7', 's1 · nexthop 8 port 8']);
    const series = o.series as { name: string; data: ([number, string] | null)[]; markLine?: { data: { xAxis: number }[] } }[];
    expect(series[0]?.data).toEqual([
      [Date.parse(t(0)), 's1 · port 7'], [Date.parse(t(10)), 's1 · port 7'], null,
      // still on it: until now, clipped to the window's end
      [Date.parse(t(40)), 's1 · port 7'], [Date.parse(t(50)), 's1 · port 7'], null,
    ]);
    expect(series[1]?.data).toEqual([[Date.parse(t(10)), 's1 · nexthop 8 port 8'], [Date.parse(t(40)), 's1 · nexthop 8 port 8'], null]);
    // a marker at each reroute, none at the primary's start
    expect(series[0]?.markLine?.data.map((m) => m.xAxis)).toEqual([Date.parse(t(10)), Date.parse(t(40))]);
  });
  it('marks INT path changes, not the first path INT reported', () => {
    const traced = (path: string, since: number, until: number | null, changed: boolean): PathSegment => ({
      switch: 's2', flow: '198.18.0.10:20002 -> 198.18.2.10:7000', path, since: t(since), until: until == null ? null : t(until),
      reroute_event_id: null, trigger: changed ? 'path change' : null, source: 'int', hops: [],
    });
    const segs = [traced('s1 (1>3) > s2', 0, 20, false), traced('s1 (1>4) > s3 (1>2) > s2', 20, null, true)];
    const o = pathOption(segs, w, Date.parse(t(30)));
    expect((o.yAxis as { data: string[] }).data).toEqual(['s2 · s1 (1>3) > s2', 's2 · s1 (1>4) > s3 (1>2) > s2']);
    const series = o.series as { markLine?: { data: { xAxis: number; label: { formatter: string } }[] } }[];
    expect(series[0]?.markLine?.data.map((m) => [m.xAxis, m.label.formatter])).toEqual([[Date.parse(t(20)), 'path change']]);
    expect(segs.map(pathWhy)).toEqual(['first INT report', 'path change (INT)']);
  });
  it('drops a segment with a bad timestamp instead of drawing it at 1970', () => {
    const o = pathOption([{ ...seg('port 7', 0, 10, null), since: 'nope' }], w);
    expect((o.series as { data: unknown[] }[])[0]?.data).toEqual([]);
  });
  it('names hops by switch and port', () => {
    expect(hopName({ switch: 's2', dev_port: 8, queue: 0 })).toBe('s2 port 8');
    expect(hopName({ switch: 's2', dev_port: 8, queue: 3 })).toBe('s2 port 8 q3');
  });
});
