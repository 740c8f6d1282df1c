// Events on a time axis (one row per kind) with the same events as a table
// beneath, so keyboard and screen-reader users get every detail too.
import { useMemo } from 'react';
import { Link } from 'react-router';
import type { EventItem } from '../api/types';
import { eventSummary, timelineOption } from '../lib/chartOptions';
import { formatTime } from '../lib/format';
import Chart from './Chart';
import { ScrollRegion } from './ScrollRegion';

export default function EventTimeline({ events, label, maxRows = 200 }: { events: readonly EventItem[]; label: string; maxRows?: number }) {
  const option = useMemo(() => timelineOption(events), [events]);
  const sorted = useMemo(() => [...events].sort((a, b) => b.ts.localeCompare(a.ts)).slice(0, maxRows), [events, maxRows]);
  if (events.length === 0) return <p className="muted">No events in this range.</p>;
  return (
    <div data-testid="event-timeline">
      <Chart option={option} label={label} className="chart" />
      <ScrollRegion label={`${label} (list)`} style={{ maxHeight: 320 }}>
        <table className="data" aria-label={`${label} (list)`}>
          <thead>
            <tr><th scope="col">Time</th><th scope="col">Type</th><th scope="col">Severity</th><th scope="col">Switch</th><th scope="col">Details</th><th scope="col">Session</th></tr>
          </thead>
          <tbody>
            {sorted.map((e) => (
              <tr key={e.id} data-type={e.type}>
                <td>{formatTime(e.ts)}</td>
                <td><code>{e.type}</code></td>
                <td>{e.severity}</td>
                <td>{e.switch ?? '–'}</td>
                <td style={{ whiteSpace: 'normal' }}>{eventSummary(e)}</td>
                <td>{e.session_id ? <Link to={`/sessions/${String(e.session_id)}`}>open</Link> : '–'}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </ScrollRegion>
    </div>
  );
}
