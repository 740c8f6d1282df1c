// The header's numbers, computed from the live session rows.
import type { LiveSession } from '../api/types';
import { MOS_DEGRADED } from './format';
import { currentMos } from './liveMetrics';

export interface Summary {
  active: number;
  offloadedShare: number | null;
  meanMos: number | null;
  degraded: number;
}

export function summarise(rows: readonly LiveSession[]): Summary {
  let offloaded = 0;
  let mosSum = 0;
  let mosN = 0;
  let degraded = 0;
  for (const s of rows) {
    if (s.offloaded) offloaded += 1;
    const mos = currentMos(s);
    if (mos != null && Number.isFinite(mos)) {
      mosSum += mos;
      mosN += 1;
      if (mos < MOS_DEGRADED) degraded += 1;
    }
  }
  return {
    active: rows.length,
    offloadedShare: rows.length ? offloaded / rows.length : null,
    meanMos: mosN ? mosSum / mosN : null,
    degraded,
  };
}
