// Column definitions shared by the live table and the audit search results.
import { createColumnHelper } from '@tanstack/react-table';
import { Link } from 'react-router';
import type { SessionSummary } from '../api/types';
import { MosBadge } from '../components/MosBadge';
import { elapsedSeconds, formatCount, formatDuration, formatMs, formatPercent, formatTime } from '../lib/format';

const col = createColumnHelper<SessionSummary>();

export function offloadLabel(s: SessionSummary): string {
  return s.offloaded ? 'switch' : `RTPProxy${s.offload_reason ? ` (${s.offload_reason})` : ''}`;
}

const callId = col.accessor('call_id', {
  header: 'Call-ID',
  size: 260,
  cell: (c) => (
    <Link to={`/sessions/${encodeURIComponent(c.row.original.id)}`} onClick={(e) => { e.stopPropagation(); }}>
      {c.getValue()}
    </Link>
  ),
});
const caller = col.accessor('caller', { header: 'Caller', size: 170, cell: (c) => <span className="mono">{c.getValue() ?? '–'}</span> });
const callee = col.accessor('callee', { header: 'Callee', size: 170, cell: (c) => <span className="mono">{c.getValue() ?? '–'}</span> });
const relayedBy = col.accessor((s) => offloadLabel(s), { id: 'offload', header: 'Relayed by', size: 170 });
const liveDuration = col.accessor((s) => elapsedSeconds(s.answered_at ?? s.started_at) ?? 0, {
  id: 'duration', header: 'Duration', size: 90, meta: { numeric: true },
  cell: (c) => formatDuration(c.getValue()),
});
const started = col.accessor('started_at', { header: 'Started', size: 190, cell: (c) => formatTime(c.getValue()) });
const duration = col.accessor((s) => elapsedSeconds(s.answered_at ?? s.started_at, s.ended_at) ?? 0, {
  id: 'duration', header: 'Duration', size: 90, meta: { numeric: true },
  cell: (c) => formatDuration(c.getValue()),
});
const state = col.accessor('state', { header: 'State', size: 90 });
const packets = col.accessor('packets', { header: 'Packets', size: 90, meta: { numeric: true }, cell: (c) => formatCount(c.getValue()) });
const loss = col.accessor('loss', { header: 'Loss', size: 80, meta: { numeric: true }, cell: (c) => formatPercent(c.getValue(), 2) });
const jitter = col.accessor('jitter_ms', { header: 'Jitter', size: 90, meta: { numeric: true }, cell: (c) => formatMs(c.getValue()) });
const mos = col.accessor('mos', {
  header: 'MOS', size: 80, meta: { numeric: true }, sortUndefined: 'last',
  cell: (c) => <MosBadge mos={c.getValue()} />,
});

/** Live table: running duration; audit: start time, final duration and state. */
export function sessionColumns(opts: { live: boolean }) {
  return opts.live
    ? [callId, caller, callee, relayedBy, liveDuration, packets, loss, jitter, mos]
    : [callId, started, caller, callee, relayedBy, duration, state, packets, loss, jitter, mos];
}
