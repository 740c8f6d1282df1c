import { useMemo } from 'react';
import { useLive, useLiveSessions } from '../api/live';
import { formatMos, formatPercent } from '../lib/format';
import { summarise } from '../lib/summary';

/** Header summary: the numbers a wall screen must show at a glance. */
export function SummaryBar() {
  const rows = useLiveSessions();
  const { congestion, status } = useLive();
  const s = useMemo(() => summarise(rows), [rows]);
  const congested = Array.from(congestion.keys());
  return (
    <ul className="summary" aria-label="Live summary">
      <li><span className="k">Active calls</span><span className="v" data-testid="sum-active">{s.active}</span></li>
      <li><span className="k">Offloaded</span><span className="v">{formatPercent(s.offloadedShare, 0)}</span></li>
      <li><span className="k">Mean MOS</span><span className="v">{formatMos(s.meanMos)}</span></li>
      <li className={s.degraded > 0 ? 'alert' : undefined}>
        <span className="k">MOS &lt; 3.6</span><span className="v">{s.degraded}</span>
      </li>
      <li className={congested.length > 0 ? 'alert' : undefined}>
        <span className="k">Congestion</span>
        <span className="v" title={congested.join(', ')}>
          {congested.length === 0 ? 'none' : `${congested.length} port${congested.length > 1 ? 's' : ''}`}
        </span>
      </li>
      <li>
        <span className="k">Feed</span>
        <span className="v" role="status" aria-live="polite">{status}</span>
      </li>
    </ul>
  );
}
