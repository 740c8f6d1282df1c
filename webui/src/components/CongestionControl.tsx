// The landing page's view of what the switches did about congestion lately:
// their reroutes and iRED's early drops per port (events of the last window,
// re-read every few seconds and when the live stream carries such an event).
import { useEffect, useMemo } from 'react';
import { Link } from 'react-router';
import { useQuery, useQueryClient } from '@tanstack/react-query';
import { api } from '../api/endpoints';
import { useLive } from '../api/live';
import { iredByPort, latestReroutes } from '../lib/congestionControl';
import { formatClock, formatCount, formatTime } from '../lib/format';

const WINDOW_MIN = 15;
const MOVE: Record<string, string> = { to_backup: 'to backup', to_primary: 'back to primary', notify_upstream: 'upstream notified' };

export function CongestionControl() {
  const q = useQuery({
    queryKey: ['events', 'congestion-control'],
    queryFn: () => api.events({
      type: ['reroute', 'ired_drop'], since: new Date(Date.now() - WINDOW_MIN * 60_000).toISOString(), limit: 1000,
    }),
    refetchInterval: 5000,
  });
  const { onMessage } = useLive();
  const qc = useQueryClient();
  useEffect(() => onMessage((m) => {
    if (m.topic === 'events' && m.items.some((e) => e.type === 'reroute' || e.type === 'ired_drop')) {
      void qc.invalidateQueries({ queryKey: ['events', 'congestion-control'] });
    }
  }), [onMessage, qc]);
  const items = q.data?.items;
  const reroutes = useMemo(() => latestReroutes(items ?? [], 5), [items]);
  const ired = useMemo(() => iredByPort(items ?? []), [items]);

  return (
    <section className="card" aria-label="Congestion control">
      <h2>Congestion control, last {WINDOW_MIN} min</h2>
      {q.isError && <p className="error" role="alert">Could not load the switches&apos; events: {q.error.message}</p>}
      <table className="data" aria-label="Recent reroutes">
        <thead>
          <tr><th scope="col">Reroute</th><th scope="col">Move</th><th scope="col">Destination</th><th scope="col">Path</th><th scope="col">Seen at</th></tr>
        </thead>
        <tbody>
          {reroutes.map((r) => (
            <tr key={r.id} data-direction={r.direction}>
              <td className="nowrap" title={formatTime(r.ts)}>{formatClock(r.ts)}</td>
              <td>{r.switch} {MOVE[r.direction] ?? r.direction}</td>
              <td className="mono">{r.flow}</td>
              <td className="mono" style={{ whiteSpace: 'normal' }}>{r.from} → {r.to}</td>
              <td className="mono">{r.seenAt}</td>
            </tr>
          ))}
          {reroutes.length === 0 && <tr><td colSpan={5} className="muted">No reroutes.</td></tr>}
        </tbody>
      </table>
      <table className="data" aria-label="iRED per port">
        <thead>
          <tr><th scope="col">iRED</th><th scope="col" className="num">Dropped early</th><th scope="col" className="num">Calls&apos; packets spared</th><th scope="col">Last</th></tr>
        </thead>
        <tbody>
          {ired.map((p) => (
            <tr key={p.key}>
              <td><Link to="/switches">{p.key}</Link></td>
              <td className="num">{formatCount(p.drops)}</td>
              <td className="num">{formatCount(p.spared)}</td>
              <td className="nowrap" title={formatTime(p.last)}>{formatClock(p.last)}</td>
            </tr>
          ))}
          {ired.length === 0 && <tr><td colSpan={4} className="muted">iRED dropped nothing.</td></tr>}
        </tbody>
      </table>
      {q.data?.next_cursor && <p className="muted">The newest {formatCount(q.data.items.length)} events; the Events page has them all.</p>}
    </section>
  );
}
