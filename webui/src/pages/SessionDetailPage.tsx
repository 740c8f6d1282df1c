import { useMemo } from 'react';
import { Link, useParams } from 'react-router';
import { useQuery } from '@tanstack/react-query';
import { api } from '../api/endpoints';
import { ChartCard } from '../components/ChartCard';
import EventTimeline from '../components/EventTimeline';
import { MosBadge } from '../components/MosBadge';
import { qualityCharts } from '../lib/chartOptions';
import { elapsedSeconds, formatCount, formatDuration, formatEndpoint, formatMs, formatPercent, formatTime } from '../lib/format';
import { offloadLabel } from './sessionColumns';

export default function SessionDetailPage() {
  const { id = '' } = useParams();
  const q = useQuery({
    queryKey: ['session', id],
    queryFn: () => api.session(id),
    // Live calls keep moving; ended ones are history.
    refetchInterval: (query) => (query.state.data?.ended_at ? false : 2000),
  });
  const charts = useMemo(() => qualityCharts(q.data?.quality ?? []), [q.data?.quality]);

  if (q.isPending) return <p className="muted">Loading session…</p>;
  if (q.isError) return <p className="error" role="alert">Could not load session: {q.error.message}</p>;
  const s = q.data;
  const empty = s.quality.length === 0;

  return (
    <article className="page" aria-labelledby="sd-title">
      <p><Link to="/">← Live sessions</Link></p>
      <h1 id="sd-title">Session <code>{s.call_id}</code></h1>
      <div className="grid-2">
        <section className="card" aria-label="Summary">
          <dl className="facts">
            <dt>State</dt><dd>{s.state}</dd>
            <dt>Relayed by</dt><dd>{offloadLabel(s)}</dd>
            <dt>Switch</dt><dd>{s.switch ?? '–'}</dd>
            <dt>Caller / callee</dt><dd className="mono">{s.caller ?? '–'} → {s.callee ?? '–'}</dd>
            <dt>Tags</dt><dd className="mono">{s.from_tag ?? '–'} / {s.to_tag ?? '–'}</dd>
            <dt>Started</dt><dd>{formatTime(s.started_at)}</dd>
            <dt>Answered</dt><dd>{formatTime(s.answered_at)}</dd>
            <dt>Ended</dt><dd>{formatTime(s.ended_at)}</dd>
            <dt>Duration</dt><dd>{formatDuration(elapsedSeconds(s.answered_at ?? s.started_at, s.ended_at))}</dd>
            <dt>Packets</dt><dd>{formatCount(s.packets)}</dd>
            <dt>Loss / jitter</dt><dd>{formatPercent(s.loss, 2)} / {formatMs(s.jitter_ms)}</dd>
            <dt>MOS</dt><dd><MosBadge mos={s.mos} /></dd>
          </dl>
        </section>
        <section className="card" aria-label="Legs and rewrite entries">
          <h2>Legs</h2>
          <div className="table-wrap">
            <table className="data" aria-label="Legs">
              <thead><tr><th scope="col">Direction</th><th scope="col">Source</th><th scope="col">Relay</th><th scope="col">Destination</th></tr></thead>
              <tbody>
                {s.legs.map((l, i) => (
                  <tr key={`${l.direction}-${String(i)}`}>
                    <td>{l.direction}</td>
                    <td className="mono">{formatEndpoint(l.src_addr, l.src_port)}</td>
                    <td className="mono">{formatEndpoint(l.relay_addr, l.relay_port)}</td>
                    <td className="mono">{formatEndpoint(l.dst_addr, l.dst_port)}</td>
                  </tr>
                ))}
                {s.legs.length === 0 && <tr><td colSpan={4} className="muted">No legs recorded.</td></tr>}
              </tbody>
            </table>
          </div>
          <h2 style={{ marginTop: '0.8rem' }}>Rewrite entries</h2>
          <div className="table-wrap">
            <table className="data" aria-label="Rewrite entries">
              <thead><tr><th scope="col">Match</th><th scope="col">Action</th><th scope="col">Installed</th><th scope="col">Removed</th></tr></thead>
              <tbody>
                {s.entries.map((e, i) => (
                  <tr key={String(i)}>
                    <td className="mono">{e.match}</td>
                    <td className="mono">{e.action}</td>
                    <td>{formatTime(e.installed_at)}</td>
                    <td>{formatTime(e.removed_at)}</td>
                  </tr>
                ))}
                {s.entries.length === 0 && <tr><td colSpan={4} className="muted">{s.offloaded ? 'No entries recorded.' : 'Not offloaded: RTPProxy relays this call.'}</td></tr>}
              </tbody>
            </table>
          </div>
        </section>
      </div>
      <div className="grid-2">
        <ChartCard title="MOS over time" option={charts.mos} empty={empty} />
        <ChartCard title="Packet loss per direction" option={charts.loss} empty={empty} />
        <ChartCard title="Jitter per direction" option={charts.jitter} empty={empty} />
        <ChartCard title="Packets per direction" option={charts.packets} empty={empty} />
      </div>
      <section className="card" aria-label="Session events">
        <h2>Events</h2>
        <EventTimeline events={s.events} label="Session events timeline" />
      </section>
    </article>
  );
}
