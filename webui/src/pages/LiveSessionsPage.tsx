import { useDeferredValue, useMemo, useState } from 'react';
import { useNavigate } from 'react-router';
import { useLive, useLiveSessions } from '../api/live';
import type { LiveSession } from '../api/types';
import { DataTable } from '../components/DataTable';
import { inPrefix, parseEndpoint, parsePrefix } from '../lib/address';
import { MOS_DEGRADED } from '../lib/format';
import { currentMos } from '../lib/liveMetrics';
import { sessionColumns } from './sessionColumns';

type RelayFilter = 'all' | 'switch' | 'rtpproxy';

export function matchesFilter(s: LiveSession, text: string, relay: RelayFilter, degradedOnly: boolean): boolean {
  if (relay === 'switch' && !s.offloaded) return false;
  if (relay === 'rtpproxy' && s.offloaded) return false;
  if (degradedOnly) {
    const mos = currentMos(s);
    if (mos == null || mos >= MOS_DEGRADED) return false;
  }
  if (!text) return true;
  const t = text.toLowerCase();
  if ([s.call_id, s.from_tag, s.to_tag, s.caller, s.callee, s.switch, s.agent, s.offload_reason].some((v) =>
    v?.toLowerCase().includes(t),
  )) return true;
  // An address in any spelling (`fd00:198:18:1:0:0:0:10`) or a prefix (`fd00::/8`,
  // `198.18.1.0/24`) matches the parties inside it.
  const prefix = parsePrefix(text);
  return prefix !== null && [s.caller, s.callee].some((e) => {
    const ep = parseEndpoint(e);
    return ep !== null && inPrefix(ep.ip, prefix);
  });
}

export default function LiveSessionsPage() {
  const rows = useLiveSessions();
  const { store } = useLive();
  const navigate = useNavigate();
  const [text, setText] = useState('');
  const [relay, setRelay] = useState<RelayFilter>('all');
  const [degradedOnly, setDegradedOnly] = useState(false);
  const deferredText = useDeferredValue(text);
  const columns = useMemo(() => sessionColumns({ live: true }), []);
  const filtered = useMemo(
    () => rows.filter((s) => matchesFilter(s, deferredText.trim(), relay, degradedOnly)),
    [rows, deferredText, relay, degradedOnly],
  );

  return (
    <section className="page fill" aria-labelledby="live-title">
      <div className="toolbar">
        <h1 id="live-title" style={{ marginRight: 'auto' }}>Live sessions</h1>
        <label className="field">
          Filter
          <input type="search" placeholder="call-id, tag, party or prefix, switch, reason…" value={text}
            onChange={(e) => { setText(e.target.value); }} aria-label="Filter sessions" style={{ width: '17rem' }} />
        </label>
        <label className="field">
          Relayed by
          <select value={relay} onChange={(e) => { setRelay(e.target.value as RelayFilter); }}>
            <option value="all">all</option>
            <option value="switch">switch</option>
            <option value="rtpproxy">RTPProxy</option>
          </select>
        </label>
        <label className="field" style={{ flexDirection: 'row', alignItems: 'center', gap: '0.4rem' }}>
          <input type="checkbox" checked={degradedOnly} onChange={(e) => { setDegradedOnly(e.target.checked); }} />
          MOS &lt; 3.6 only
        </label>
        <span className="muted" role="status" data-testid="live-count">
          {store.loaded ? `${filtered.length} of ${rows.length} sessions` : 'loading…'}
        </span>
      </div>
      <DataTable
        data={filtered}
        columns={columns}
        getRowId={(s) => String(s.id)}
        label="Live sessions"
        initialSorting={[{ id: 'duration', desc: false }]}
        onRowClick={(s) => { void navigate(`/sessions/${String(s.id)}`); }}
        emptyText={store.loaded ? 'No active sessions match.' : 'Waiting for the live feed…'}
      />
    </section>
  );
}
