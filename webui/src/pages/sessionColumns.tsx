// Column definitions of the live table and the audit search results.
import { createColumnHelper } from '@tanstack/react-table';
import { Link } from 'react-router';
import type { LiveSession, SessionSummary } from '../api/types';
import { MosBadge } from '../components/MosBadge';
import { compareEndpoints, fitEndpoint } from '../lib/address';
import { elapsedSeconds, formatCount, formatDuration, formatMs, formatPercent, formatTime } from '../lib/format';
import { currentJitterMs, currentMos, lossFraction, packetCount } from '../lib/liveMetrics';

const col = createColumnHelper<LiveSession>();

/** A silent direction, as the console names it. */
export const ONE_WAY = { caller_to_callee: 'caller → callee', callee_to_caller: 'callee → caller' } as const;

export function offloadLabel(s: Pick<SessionSummary, 'offloaded' | 'offload_reason'>): string {
  return s.offloaded ? 'switch' : `RTPProxy${s.offload_reason ? ` (${s.offload_reason})` : ''}`;
}

const callId = col.accessor('call_id', {
  header: 'Call-ID',
  size: 250,
  cell: (c) => (
    <Link to={`/sessions/${String(c.row.original.id)}`} onClick={(e) => { e.stopPropagation(); }}>
      {c.getValue()}
    </Link>
  ),
});
const tags = col.accessor((s) => `${s.from_tag || '–'} → ${s.to_tag ?? '–'}`, {
  id: 'tags', header: 'Tags (from → to)', size: 200, cell: (c) => <span className="mono">{c.getValue()}</span>,
});
const relayedBy = col.accessor((s) => offloadLabel(s), {
  id: 'offload', header: 'Relayed by', size: 170,
  cell: (c) => <span title={c.getValue()}>{c.getValue()}</span>, // the reason may be cut off
});
// Wide enough for a testbed or site IPv6 endpoint (`[fd00:198:18:2::10]:20000`);
// a longer one loses the middle of its address (the whole of it in the tooltip).
const PARTY_CHARS = 27;
const party = (which: 'caller' | 'callee', header: string) =>
  col.accessor((s) => s[which] ?? '–', {
    id: which, header, size: 230,
    sortingFn: (a, b, id) => compareEndpoints(a.getValue<string>(id), b.getValue<string>(id)),
    cell: (c) => <span className="mono" title={c.getValue()}>{fitEndpoint(c.getValue(), PARTY_CHARS)}</span>,
  });
const caller = party('caller', 'Caller');
const callee = party('callee', 'Callee');
const sw = col.accessor((s) => s.switch ?? '–', { id: 'switch', header: 'Switch', size: 100 });
const liveDuration = col.accessor((s) => elapsedSeconds(s.answered_at ?? s.started_at) ?? 0, {
  id: 'duration', header: 'Duration', size: 90, meta: { numeric: true },
  cell: (c) => formatDuration(c.getValue()),
});
const started = col.accessor('started_at', { header: 'Started', size: 215, cell: (c) => formatTime(c.getValue()) });
const duration = col.accessor((s) => elapsedSeconds(s.answered_at ?? s.started_at, s.ended_at) ?? 0, {
  id: 'duration', header: 'Duration', size: 90, meta: { numeric: true },
  cell: (c) => formatDuration(c.getValue()),
});
const state = col.accessor((s) => (s.one_way ? `${s.state}, one-way` : s.state), {
  id: 'state', header: 'State', size: 110,
  cell: (c) => (c.row.original.one_way
    ? <span title={`no media ${ONE_WAY[c.row.original.one_way]}`}>{c.row.original.state} <span className="badge bad">one-way</span></span>
    : c.row.original.state),
});
const packets = col.accessor((s) => packetCount(s), {
  id: 'packets', header: 'Packets', size: 90, meta: { numeric: true }, sortUndefined: 'last',
  cell: (c) => formatCount(c.getValue()),
});
const loss = col.accessor((s) => lossFraction(s), {
  id: 'loss', header: 'Loss', size: 80, meta: { numeric: true }, sortUndefined: 'last',
  cell: (c) => formatPercent(c.getValue(), 2),
});
const jitter = col.accessor((s) => currentJitterMs(s), {
  id: 'jitter', header: 'Jitter', size: 90, meta: { numeric: true }, sortUndefined: 'last',
  cell: (c) => formatMs(c.getValue()),
});
const mos = col.accessor((s) => currentMos(s) ?? undefined, {
  id: 'mos', header: 'MOS', size: 80, meta: { numeric: true }, sortUndefined: 'last',
  cell: (c) => (c.row.original.one_way
    ? <span className="badge bad" title={`no media ${ONE_WAY[c.row.original.one_way]}`}>no media</span>
    : <MosBadge mos={c.getValue()} />),
});

// Audit: the call's stored aggregates (mean and worst MOS, loss over the call, worst jitter).
const mosMean = col.accessor((s) => s.mos_avg ?? undefined, {
  id: 'mos', header: 'MOS mean', size: 112, meta: { numeric: true }, sortUndefined: 'last',
  cell: (c) => <MosBadge mos={c.getValue()} />,
});
const mosMin = col.accessor((s) => s.mos_min ?? undefined, {
  id: 'mos_min', header: 'MOS min', size: 104, meta: { numeric: true }, sortUndefined: 'last',
  cell: (c) => <MosBadge mos={c.getValue()} />,
});
const jitterMax = col.accessor((s) => s.jitter_ms_max ?? undefined, {
  id: 'jitter', header: 'Max jitter', size: 100, meta: { numeric: true }, sortUndefined: 'last',
  cell: (c) => formatMs(c.getValue()),
});

/** Live table: running duration and current quality first (in view on a
 * 1280 px screen), then who and where; audit: start time, state, the call's
 * quality (what an operator searches for), then who and where. */
export function sessionColumns(opts: { live: boolean }) {
  return opts.live
    ? [callId, liveDuration, mos, loss, jitter, packets, caller, callee, relayedBy, sw, tags]
    : [callId, started, duration, state, mosMean, mosMin, loss, jitterMax, packets, relayedBy, caller, callee, sw, tags];
}
