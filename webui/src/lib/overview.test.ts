import { describe, expect, it } from 'vitest';
import type { LiveSession } from '../api/types';
import { makeSession } from '../test/fixtures';
import { appendActivity, mosHistogram, notOffloaded, percentile, qualitySpread } from './overview';

const withMos = (i: number, mos: number | null, over: Partial<LiveSession> = {}): LiveSession => ({
  ...makeSession(i, { mos_avg: mos, ...over }),
  live: mos == null ? undefined : { dirs: { caller_to_callee: { mos, jitter_ms: i, loss_pct: i / 10, ts: '2026-01-01T00:00:00Z' } } },
});

describe('overview figures', () => {
  it('bins MOS in 0.2 steps with 3.6 starting a bin, and counts calls under 3.6', () => {
    const h = mosHistogram([withMos(1, 4.41), withMos(2, 3.6), withMos(3, 3.59), withMos(4, 1.2), withMos(5, null, { mos_avg: null })]);
    expect(h.withMos).toBe(4);
    expect(h.under).toBe(2);
    const bin = (m: number) => h.counts[h.edges.findIndex((e) => Math.abs(e - m) < 1e-9)];
    expect(bin(4.4)).toBe(1);
    expect(bin(3.6)).toBe(1);
    expect(bin(3.4)).toBe(1);
    expect(bin(1.2)).toBe(1);
    expect(h.counts.reduce((a, b) => a + b, 0)).toBe(4);
  });
  it('takes nearest-rank percentiles', () => {
    const xs = Array.from({ length: 100 }, (_, i) => i + 1);
    expect(percentile(xs, 0.5)).toBe(50);
    expect(percentile(xs, 0.99)).toBe(99);
    expect(percentile([], 0.5)).toBeNull();
  });
  it('spreads current loss and jitter over calls', () => {
    const s = qualitySpread([withMos(1, 4), withMos(2, 4), withMos(3, 4), withMos(40, 2)]);
    expect(s.jitter.n).toBe(4);
    expect(s.jitter.max).toBe(40);
    expect(s.loss.p[0]).toBeCloseTo(0.002);
    expect(s.loss.max).toBeCloseTo(0.04);
  });
  it('counts calls left on RTPProxy per reason', () => {
    const rows = [4, 8, 12, 1].map((i) => makeSession(i, i === 8 ? { offload_reason: 'codec' } : {}));
    expect(notOffloaded(rows)).toEqual([{ reason: 'table full', count: 2 }, { reason: 'codec', count: 1 }]);
  });
  it('keeps an hour of activity points', () => {
    const pts = [{ ts: 0, active: 1, offloaded: 1 }, { ts: 3_000_000, active: 2, offloaded: 1 }];
    expect(appendActivity(pts, { ts: 3_700_000, active: 3, offloaded: 2 }, 3_600_000).map((p) => p.ts)).toEqual([3_000_000, 3_700_000]);
  });
});
