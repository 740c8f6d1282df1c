// The header's numbers, computed from the live session rows.
import type { SessionSummary } from '../api/types';
import { MOS_DEGRADED } from './format';

export interface Summary {
  active: number;
  offloadedShare: number | null;
  meanMos: number | null;
  degraded: number;
}

export function summarise(rows: readonly SessionSummary[]): Summary {
  let offloaded = 0;
  let mosSum = 0;
  let mosN = 0;
  let degraded = 0;
  for (const s of rows) {
    if (s.offloaded) offloaded += 1;
    if (s.mos != null && Number.isFinite(s.mos)) {
      mosSum += s.mos;
      mosN += 1;
      if (s.mos < MOS_DEGRADED) degraded += 1;
    }
  }
  return {
    active: rows.length,
    offloadedShare: rows.length ? offloaded / rows.length : null,
    meanMos: mosN ? mosSum / mosN : null,
    degraded,
  };
}
