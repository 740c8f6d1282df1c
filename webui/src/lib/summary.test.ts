import { describe, expect, it } from 'vitest';
import { summarise } from './summary';
import { makeSession } from '../test/fixtures';

describe('summarise', () => {
  it('counts active, offloaded share, mean MOS and degraded calls', () => {
    const rows = [
      makeSession(1, { offloaded: true, mos_avg: 4.4 }),
      makeSession(2, { offloaded: true, mos_avg: 3.0 }),
      makeSession(3, { offloaded: false, mos_avg: 3.59 }),
      makeSession(4, { offloaded: false, mos_avg: null }),
    ];
    const s = summarise(rows);
    expect(s.active).toBe(4);
    expect(s.offloadedShare).toBe(0.5);
    expect(s.meanMos).toBeCloseTo((4.4 + 3.0 + 3.59) / 3);
    expect(s.degraded).toBe(2);
  });
  it('has no share or mean without calls', () => {
    expect(summarise([])).toEqual({ active: 0, offloadedShare: null, meanMos: null, degraded: 0 });
  });
});
