import { useState } from 'react';
import { useQuery } from '@tanstack/react-query';
import { api } from '../api/endpoints';
import EventTimeline from '../components/EventTimeline';
import { TIMELINE_ROWS } from '../lib/chartOptions';
import type { EventType, Severity } from '../api/types';

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
    </section>
  );
}
