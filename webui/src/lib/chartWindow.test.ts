import { describe, expect, it } from 'vitest';
import { depthUnit, episodeAreas, mergeOverlapping, qualityCharts, qualityWindow, queueCharts, windowAround } from './chartOptions';
import type { QualitySeries, QueueSeries } from '../api/types';

const T = Date.parse('2026-01-01T10:00:00Z');
const at = (s: number) => new Date(T + s * 1000).toISOString();
const point = (s: number) => ({ ts: at(s), packets: 50, lost: 0, loss_pct: 0, jitter_ms: 1, delay_ms: null, mos: 4.4, r_factor: null });

type Opt = { xAxis: { min?: number; max?: number }; series: { data: [number, number | null][]; markArea?: { data: [{ xAxis: number; name: string }, { xAxis: number }][] } }[] };

describe('chart windows', () => {
  it('gives a 4-second-old call a one-minute window around its samples, not ECharts\' two days', () => {
    const series: QualitySeries[] = [{ direction: 'caller_to_callee', resolution_s: 1, points: [point(2)] }];
    const w = qualityWindow(series, { started_at: at(0), ended_at: null }, T + 4000);
    expect(w.from).toBeLessThanOrEqual(T + 2000);
    expect(w.to - w.from).toBeLessThan(70_000);
    const mos = qualityCharts(series, [], { window: w }).mos as unknown as Opt;
    expect(mos.xAxis.min).toBe(w.from);
    expect(mos.xAxis.max).toBe(w.to);
    const [t] = mos.series[0]?.data[0] ?? [];
    expect(t).toBeGreaterThan(w.from);
    expect(t).toBeLessThan(w.to);
  });
  it('spans a long call end to end and stops at its end', () => {
    const series: QualitySeries[] = [{ direction: 'caller_to_callee', resolution_s: 1, points: [point(0), point(600)] }];
    const w = qualityWindow(series, { started_at: at(0), ended_at: at(601) }, T + 86_400_000);
    expect(w.from).toBeLessThan(T);
    expect(w.to).toBeGreaterThan(T + 600_000);
    expect(w.to).toBeLessThan(T + 700_000);
  });
  it('pads at least a minute', () => {
    const w = windowAround(T, T);
    expect(w.to - w.from).toBeGreaterThanOrEqual(60_000);
  });
  it('clips congestion episodes to the window and labels the port', () => {
    const w = { from: T, to: T + 60_000 };
    const areas = episodeAreas([
      { switch: 'sw1', dev_port: 3, queue: 0, started_at: at(-30), ended_at: at(20), onset_event_id: 1, queue_delay_us: null },
      { switch: 'sw1', dev_port: 4, queue: 0, started_at: at(50), ended_at: null, onset_event_id: 2, queue_delay_us: null },
      { switch: 'sw1', dev_port: 5, queue: 0, started_at: at(-90), ended_at: at(-60), onset_event_id: 3, queue_delay_us: null },
    ], w);
    expect(areas).toEqual([
      { from: T, to: T + 20_000, label: 'sw1 port 3 congested' },
      { from: T + 50_000, to: T + 60_000, label: 'sw1 port 4 congested' },
    ]);
    const series: QualitySeries[] = [{ direction: 'caller_to_callee', resolution_s: 1, points: [point(1)] }];
    const o = qualityCharts(series, [], { window: w, congestion: [
      { switch: 'sw1', dev_port: 3, queue: 0, started_at: at(-30), ended_at: at(20), onset_event_id: 1, queue_delay_us: null },
    ] }).loss as unknown as Opt;
    expect(o.series[0]?.markArea?.data[0]?.[0].name).toBe('sw1 port 3 congested');
  });
});

describe('queue depth', () => {
  const qs = (depth_bytes: number | null, depth_pkts: number | null): QueueSeries[] => [{
    switch: 'sw1', dev_port: 3, queue: 0, resolution_s: 1,
    points: [{ ts: at(1), depth_pkts, depth_max_pkts: null, depth_bytes, queue_delay_us: 800_000, queue_delay_max_us: null, utilisation: 0.9, drops: 1200 }],
  }];
  it('plots the bytes the collector reports (cells × 80 B) in KiB', () => {
    const series = qs(80 * 1280, null);
    expect(depthUnit(series)).toBe('KiB');
    const o = queueCharts(series, [], { window: { from: T, to: T + 300_000 } }).depth as unknown as Opt;
    expect(o.series[0]?.data).toEqual([[T + 1000, 100]]);
    expect(o.xAxis).toMatchObject({ min: T, max: T + 300_000 });
  });
  it('falls back to packets when a source reports only packets', () => {
    const series = qs(null, 42);
    expect(depthUnit(series)).toBe('pkts');
    expect((queueCharts(series).depth as unknown as Opt).series[0]?.data).toEqual([[T + 1000, 42]]);
  });
});

describe('mergeOverlapping', () => {
  it('joins spans that overlap and keeps apart those that do not', () => {
    const merged = mergeOverlapping([
      { from: 30, to: 50, label: 'sw1 port 3 congested' },
      { from: 0, to: 10, label: 'sw1 port 1 congested' },
      { from: 20, to: 40, label: 'sw1 port 2 congested' },
      { from: 45, to: 60, label: 'sw1 port 2 congested' },
    ]);
    expect(merged).toEqual([
      { from: 0, to: 10, label: 'sw1 port 1 congested' },
      { from: 20, to: 60, label: 'sw1 port 2 congested · sw1 port 3 congested' },
    ]);
  });
});

describe('mergeOverlapping with a gap', () => {
  it('joins spans closer than the gap', () => {
    const spans = [
      { from: 0, to: 10, label: 'a' },
      { from: 14, to: 20, label: 'b' },
    ];
    expect(mergeOverlapping(spans, 5)).toEqual([{ from: 0, to: 20, label: 'a · b' }]);
    expect(mergeOverlapping(spans, 3)).toHaveLength(2);
  });
});
