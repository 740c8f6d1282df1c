// The Overview page's numbers, computed from the live session rows (pure, unit-tested).
import type { LiveSession } from '../api/types';
import { MOS_DEGRADED } from './format';
import { currentJitterMs, currentMos, lossFraction } from './liveMetrics';

export const MOS_BIN = 0.2;
export const MOS_LO = 1.0;
export const MOS_HI = 4.6;

export interface MosHistogram {
  /** Lower edge of each bin (MOS_LO, MOS_LO + MOS_BIN, …); the last bin includes MOS_HI. */
  edges: number[];
  counts: number[];
  /** Calls with a MOS, and of those under 3.6. */
  withMos: number;
  under: number;
}

export function mosHistogram(rows: readonly LiveSession[]): MosHistogram {
  const n = Math.round((MOS_HI - MOS_LO) / MOS_BIN);
  const edges = Array.from({ length: n }, (_, i) => +(MOS_LO + i * MOS_BIN).toFixed(2));
  const counts = new Array<number>(n).fill(0);
  let withMos = 0;
  let under = 0;
  for (const s of rows) {
    const mos = currentMos(s);
    if (mos == null || !Number.isFinite(mos)) continue;
    withMos += 1;
    if (mos < MOS_DEGRADED) under += 1;
    // Bin by the rounded value so 3.6 lands in [3.6, 3.8), not [3.4, 3.6).
    const i = Math.floor(+((mos - MOS_LO) / MOS_BIN).toFixed(6));
    const k = Math.min(n - 1, Math.max(0, i));
    counts[k] = (counts[k] ?? 0) + 1;
  }
  return { edges, counts, withMos, under };
}

/** Nearest-rank percentile of `sorted` (ascending); null when empty. */
export function percentile(sorted: readonly number[], p: number): number | null {
  if (!sorted.length) return null;
  const rank = Math.ceil(p * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))] ?? null;
}

/** A call's current loss: the worse direction's latest sample when the stream
 * delivered one, else the call's running counters. Fraction 0..1. */
export function currentLoss(s: LiveSession): number | null {
  const dirs = Object.values(s.live?.dirs ?? {});
  if (dirs.length) return Math.max(...dirs.map((d) => d.loss_pct)) / 100;
  return lossFraction(s);
}

export const PERCENTILES = [0.5, 0.9, 0.99] as const;

export interface Spread {
  n: number;
  p: (number | null)[];
  max: number | null;
}

function spread(values: number[]): Spread {
  const sorted = values.filter((v) => Number.isFinite(v)).sort((a, b) => a - b);
  return { n: sorted.length, p: PERCENTILES.map((q) => percentile(sorted, q)), max: sorted.at(-1) ?? null };
}

export function qualitySpread(rows: readonly LiveSession[]): { loss: Spread; jitter: Spread } {
  const loss: number[] = [];
  const jitter: number[] = [];
  for (const s of rows) {
    const l = currentLoss(s);
    if (l != null) loss.push(l);
    const j = currentJitterMs(s);
    if (j != null) jitter.push(j);
  }
  return { loss: spread(loss), jitter: spread(jitter) };
}

/** Calls left on RTPProxy per reason, most frequent first. */
export function notOffloaded(rows: readonly LiveSession[]): { reason: string; count: number }[] {
  const m = new Map<string, number>();
  for (const s of rows) {
    if (s.offloaded) continue;
    const r = s.offload_reason?.trim() || 'no reason given';
    m.set(r, (m.get(r) ?? 0) + 1);
  }
  return Array.from(m, ([reason, count]) => ({ reason, count })).sort((a, b) => b.count - a.count || a.reason.localeCompare(b.reason));
}

export interface ActivityPoint {
  ts: number;
  active: number;
  offloaded: number;
}

/** Appends a live point and keeps the last `spanMs` (points in time order, one per timestamp). */
export function appendActivity(points: readonly ActivityPoint[], p: ActivityPoint, spanMs: number): ActivityPoint[] {
  const kept = points.filter((x) => x.ts >= p.ts - spanMs && x.ts < p.ts);
  return [...kept, p];
}

export function mosHistogramOption(h: MosHistogram, colours: { good: string; bad: string }): Record<string, unknown> {
  return {
    animation: false,
    grid: { left: 48, right: 16, top: 24, bottom: 48 },
    legend: { show: false },
    tooltip: { trigger: 'axis' },
    xAxis: {
      type: 'category', name: 'MOS', nameLocation: 'middle', nameGap: 28,
      data: h.edges.map((e) => e.toFixed(1)),
      axisLabel: { interval: 1 },
    },
    yAxis: { type: 'value', name: 'calls', minInterval: 1 },
    series: [{
      name: 'calls', type: 'bar', barCategoryGap: '10%',
      data: h.counts.map((c, i) => ({
        value: c,
        itemStyle: { color: (h.edges[i] ?? 0) < MOS_DEGRADED ? colours.bad : colours.good },
      })),
    }],
  };
}

export function reasonsOption(rows: readonly { reason: string; count: number }[]): Record<string, unknown> {
  const top = rows.slice(0, 8).reverse();
  return {
    animation: false,
    grid: { left: 16, right: 40, top: 8, bottom: 24, containLabel: true },
    legend: { show: false },
    tooltip: { trigger: 'axis' },
    xAxis: { type: 'value', minInterval: 1, name: 'calls' },
    yAxis: { type: 'category', data: top.map((r) => r.reason), axisLabel: { width: 180, overflow: 'truncate' } },
    series: [{ name: 'calls on RTPProxy', type: 'bar', data: top.map((r) => r.count), label: { show: true, position: 'right', textBorderWidth: 0, fontWeight: 'bold' } }],
  };
}
