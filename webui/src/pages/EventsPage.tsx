import { useEffect, useState } from 'react';
import { useQuery, useQueryClient } from '@tanstack/react-query';
import { api } from '../api/endpoints';
import { useLive } from '../api/live';
import EventTimeline from '../components/EventTimeline';
import { ScrollRegion } from '../components/ScrollRegion';
import { TIMELINE_ROWS } from '../lib/chartOptions';
import { congestionSeenAt } from '../lib/congestionControl';
import { elapsedSeconds, formatDuration, formatMs, formatTime } from '../lib/format';
import type { EventItem, EventType, Severity } from '../api/types';

const DIRECTION: Record<string, string> = {
  to_backup: 'to backup',
  to_primary: 'back to primary',
  notify_upstream: 'upstream notified',
};

const text = (e: EventItem, k: string) => {
  const v = e.payload[k];
  return typeof v === 'string' || typeof v === 'number' ? String(v) : '–';
};

const RANGES = [
  { label: 'last 15 min', seconds: 900 },
  { label: 'last hour', seconds: 3600 },
  { label: 'last 24 h', seconds: 86400 },
  { label: 'last 7 days', seconds: 7 * 86400 },
] as const;

export default function EventsPage() {
  const [type, setType] = useState<EventType | ''>('');
  const [severity, setSeverity] = useState<Severity | ''>('');
  const [range, setRange] = useState<(typeof RANGES)[number]>(RANGES[1]);
  const [sw, setSw] = useState('');
  const q = useQuery({
    queryKey: ['events', type, severity, range.seconds, sw],
    queryFn: () =>
      api.events({
        type: type ? [type] : undefined,
        severity: severity || undefined,
        switch: sw || undefined,
        since: new Date(Date.now() - range.seconds * 1000).toISOString(),
        limit: 1000,
      }),
    refetchInterval: 5000,
  });
  const since = (seconds: number) => new Date(Date.now() - seconds * 1000).toISOString();
  const reroutes = useQuery({
    queryKey: ['events', 'reroutes', range.seconds, sw],
    queryFn: () => api.events({ type: ['reroute'], switch: sw || undefined, since: since(range.seconds), limit: 500 }),
    refetchInterval: 15_000,
  });
  const episodes = useQuery({
    queryKey: ['congestion', 'events-page', range.seconds, sw],
    queryFn: () => api.congestion({ since: since(range.seconds), switch: sw || undefined }),
    refetchInterval: 15_000,
  });
  // Live: an event on the stream re-reads the lists (at most twice a second).
  const { onMessage } = useLive();
  const qc = useQueryClient();
  useEffect(() => {
    let pending: ReturnType<typeof setTimeout> | undefined;
    const off = onMessage((m) => {
      if (m.topic !== 'events' || pending) return;
      pending = setTimeout(() => {
        pending = undefined;
        void qc.invalidateQueries({ queryKey: ['events'] });
        if (m.items.some((x) => x.type === 'congestion_onset' || x.type === 'congestion_clear')) {
          void qc.invalidateQueries({ queryKey: ['congestion', 'events-page'] });
        }
      }, 500);
    });
    return () => {
      off();
      clearTimeout(pending);
    };
  }, [onMessage, qc]);
  return (
    <section className="page" aria-labelledby="ev-title">
      <div className="toolbar">
        <h1 id="ev-title" style={{ marginRight: 'auto' }}>Events</h1>
        <label className="field">
          Type
          <select aria-label="Event type" value={type} onChange={(e) => { setType(e.target.value as EventType | ''); }}>
            <option value="">all</option>
            {TIMELINE_ROWS.map((k) => <option key={k} value={k}>{k}</option>)}
          </select>
        </label>
        <label className="field">
          Severity
          <select value={severity} onChange={(e) => { setSeverity(e.target.value as Severity | ''); }}>
            <option value="">any</option>
            <option value="info">info</option>
            <option value="warning">warning</option>
            <option value="error">error</option>
          </select>
        </label>
        <label className="field">
          Switch
          <input value={sw} onChange={(e) => { setSw(e.target.value.trim()); }} placeholder="any" />
        </label>
        <label className="field">
          Range
          <select value={range.label} onChange={(e) => { setRange(RANGES.find((r) => r.label === e.target.value) ?? RANGES[1]); }}>
            {RANGES.map((r) => <option key={r.label}>{r.label}</option>)}
          </select>
        </label>
      </div>
      {q.isError && <p className="error" role="alert">Could not load events: {q.error.message}</p>}
      {q.isPending ? <p className="muted">Loading events…</p> : q.data && (
        <section className="card" aria-label="Event timeline">
          <EventTimeline events={q.data.items} label="Events timeline" />
          {q.data.next_cursor && <p className="muted">Showing the newest {q.data.items.length}; narrow the range or kind for older events.</p>}
        </section>
      )}
      <div className="grid-2">
        <section className="card" aria-label="Reroutes">
          <h2>Reroutes</h2>
          {reroutes.isError && <p className="error" role="alert">Could not load reroutes: {reroutes.error.message}</p>}
          <ScrollRegion label="Reroutes (list)" style={{ maxHeight: 320 }}>
            <table className="data" aria-label="Reroutes">
              <thead>
                <tr>
                  <th scope="col">Time</th><th scope="col">Switch</th><th scope="col">Destination</th>
                  <th scope="col">Move</th><th scope="col">Path</th><th scope="col">Congestion seen at</th><th scope="col">Why</th>
                </tr>
              </thead>
              <tbody>
                {(reroutes.data?.items ?? []).map((e) => (
                  <tr key={e.id} data-direction={text(e, 'direction')}>
                    <td className="nowrap">{formatTime(e.ts)}</td>
                    <td>{e.switch ?? '–'}</td>
                    <td className="mono">{text(e, 'flow')}</td>
                    <td>{DIRECTION[text(e, 'direction')] ?? text(e, 'direction')}</td>
                    <td className="mono">{text(e, 'from_path')} → {text(e, 'to_path')}</td>
                    <td className="mono">{congestionSeenAt(e)}</td>
                    <td style={{ whiteSpace: 'normal' }}>{text(e, 'trigger')}</td>
                  </tr>
                ))}
                {reroutes.data?.items.length === 0 && <tr><td colSpan={7} className="muted">No reroutes in this range.</td></tr>}
              </tbody>
            </table>
          </ScrollRegion>
        </section>
        <section className="card" aria-label="Congestion episodes">
          <h2>Congestion episodes</h2>
          {episodes.isError && <p className="error" role="alert">Could not load congestion episodes: {episodes.error.message}</p>}
          <ScrollRegion label="Congestion episodes (list)" style={{ maxHeight: 320 }}>
            <table className="data" aria-label="Congestion episodes">
              <thead>
                <tr>
                  <th scope="col">Queue</th><th scope="col">Started</th><th scope="col">Ended</th>
                  <th scope="col">Duration</th><th scope="col" className="num">Delay at onset</th>
                </tr>
              </thead>
              <tbody>
                {[...(episodes.data ?? [])].reverse().map((e) => (
                  <tr key={e.onset_event_id} data-open={e.ended_at == null ? 'yes' : 'no'}>
                    <td>{e.switch ?? '?'} port {e.dev_port == null ? '?' : String(e.dev_port)}{e.queue ? ` q${String(e.queue)}` : ''}</td>
                    <td className="nowrap">{formatTime(e.started_at)}</td>
                    <td className="nowrap">{e.ended_at ? formatTime(e.ended_at) : <strong>ongoing</strong>}</td>
                    <td>{formatDuration(elapsedSeconds(e.started_at, e.ended_at))}</td>
                    <td className="num">{e.queue_delay_us == null ? '–' : formatMs(e.queue_delay_us / 1000)}</td>
                  </tr>
                ))}
                {episodes.data?.length === 0 && <tr><td colSpan={5} className="muted">No congestion in this range.</td></tr>}
              </tbody>
            </table>
          </ScrollRegion>
        </section>
      </div>
    </section>
  );
}
