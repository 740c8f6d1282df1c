import { useMemo, useState, type SyntheticEvent } from 'react';
import { useInfiniteQuery } from '@tanstack/react-query';
import { useNavigate } from 'react-router';
import { api } from '../api/endpoints';
import type { SessionQuery, SessionState } from '../api/types';
import { DataTable } from '../components/DataTable';
import { sessionColumns } from './sessionColumns';

interface FormState {
  since: string;
  until: string;
  state: SessionState | '';
  offloaded: '' | 'true' | 'false';
  mos_min: string;
  mos_max: string;
  loss_min: string;
  jitter_min: string;
  call_id: string;
  address: string;
  switch: string;
}

const EMPTY: FormState = {
  since: '', until: '', state: '', offloaded: '', mos_min: '', mos_max: '', loss_min: '', jitter_min: '', call_id: '', address: '', switch: '',
};

/** datetime-local values are in the operator's zone; the API wants ISO 8601. */
function toIso(local: string): string | undefined {
  if (!local) return undefined;
  const t = new Date(local);
  return Number.isNaN(t.getTime()) ? undefined : t.toISOString();
}

function num(s: string): number | undefined {
  if (s.trim() === '') return undefined;
  const n = Number(s);
  return Number.isFinite(n) ? n : undefined;
}

export function toFilters(f: FormState): SessionQuery {
  return {
    started_from: toIso(f.since),
    started_to: toIso(f.until),
    state: f.state ? [f.state] : undefined,
    offloaded: f.offloaded === '' ? undefined : f.offloaded === 'true',
    mos_min: num(f.mos_min),
    mos_max: num(f.mos_max),
    loss_min: num(f.loss_min),
    jitter_min: num(f.jitter_min),
    call_id: f.call_id.trim() || undefined,
    // `a/len` is a prefix (`fd00::/8`); anything else an address (the server checks both).
    address: f.address.trim() && !f.address.includes('/') ? f.address.trim() : undefined,
    prefix: f.address.includes('/') ? f.address.trim() : undefined,
    switch: f.switch.trim() || undefined,
  };
}

const PAGE = 200; // server maximum is 500

export default function AuditPage() {
  const [form, setForm] = useState<FormState>(EMPTY);
  const [filters, setFilters] = useState<SessionQuery>({});
  const [exportError, setExportError] = useState<string | null>(null);
  const [exporting, setExporting] = useState(false);
  const navigate = useNavigate();
  const columns = useMemo(() => sessionColumns({ live: false }), []);

  const q = useInfiniteQuery({
    queryKey: ['audit', filters],
    queryFn: ({ pageParam }) => api.sessions({ ...filters, limit: PAGE, cursor: pageParam }),
    initialPageParam: undefined as string | undefined,
    getNextPageParam: (last) => last.next_cursor ?? undefined,
  });
  const rows = useMemo(() => q.data?.pages.flatMap((p) => p.items) ?? [], [q.data]);

  const set = (k: keyof FormState) => (e: { target: { value: string } }) => {
    setForm((f) => ({ ...f, [k]: e.target.value }));
  };
  const submit = (e: SyntheticEvent) => {
    e.preventDefault();
    setFilters(toFilters(form));
  };
  const exportCsv = async () => {
    setExporting(true);
    setExportError(null);
    try {
      const res = await api.sessionsCsv(filters);
      const blob = await res.blob();
      const url = URL.createObjectURL(blob);
      const a = document.createElement('a');
      a.href = url;
      a.download = `p4relay-sessions-${new Date().toISOString().slice(0, 19).replace(/:/g, '')}.csv`;
      a.click();
      setTimeout(() => { URL.revokeObjectURL(url); }, 10_000);
    } catch (err) {
      setExportError(err instanceof Error ? err.message : String(err));
    } finally {
      setExporting(false);
    }
  };

  return (
    <section className="page fill" aria-labelledby="audit-title">
      <h1 id="audit-title">Audit</h1>
      <form className="card toolbar" onSubmit={submit} aria-label="Search sessions">
        <label className="field">From (local time)<input type="datetime-local" value={form.since} onChange={set('since')} /></label>
        <label className="field">To (local time)<input type="datetime-local" value={form.until} onChange={set('until')} /></label>
        <label className="field">
          State
          <select value={form.state} onChange={set('state')}>
            <option value="">any</option>
            <option value="setup">setup</option>
            <option value="active">active</option>
            <option value="ended">ended</option>
            <option value="failed">failed</option>
          </select>
        </label>
        <label className="field">
          Relayed by
          <select value={form.offloaded} onChange={set('offloaded')}>
            <option value="">any</option>
            <option value="true">switch</option>
            <option value="false">RTPProxy</option>
          </select>
        </label>
        <label className="field">MOS ≥<input type="number" step="0.1" min="1" max="5" value={form.mos_min} onChange={set('mos_min')} style={{ width: '5rem' }} /></label>
        <label className="field">MOS ≤<input type="number" step="0.1" min="1" max="5" value={form.mos_max} onChange={set('mos_max')} style={{ width: '5rem' }} /></label>
        <label className="field">Loss ≥ %<input type="number" step="0.1" min="0" max="100" value={form.loss_min} onChange={set('loss_min')} style={{ width: '5rem' }} /></label>
        <label className="field">Max jitter ≥ ms<input type="number" step="0.1" min="0" value={form.jitter_min} onChange={set('jitter_min')} style={{ width: '6rem' }} /></label>
        <label className="field">Call-ID<input value={form.call_id} onChange={set('call_id')} /></label>
        <label className="field">Address or prefix<input value={form.address} onChange={set('address')} placeholder="198.18.1.10, fd00::/8" /></label>
        <label className="field">Switch<input value={form.switch} onChange={set('switch')} style={{ width: '7rem' }} /></label>
        <button className="primary" type="submit">Search</button>
        <button type="button" onClick={() => { setForm(EMPTY); setFilters({}); }}>Clear</button>
        <button type="button" onClick={() => { void exportCsv(); }} disabled={exporting}>
          {exporting ? 'Exporting…' : 'Export CSV'}
        </button>
      </form>
      {exportError && <p className="error" role="alert">CSV export failed: {exportError}</p>}
      {q.isError && <p className="error" role="alert">Search failed: {q.error.message}</p>}
      <div className="toolbar">
        <span className="muted" role="status" data-testid="audit-count">
          {q.isPending ? 'Searching…' : `${rows.length} session${rows.length === 1 ? '' : 's'}${q.hasNextPage ? ' (more available)' : ''}`}
        </span>
        {q.hasNextPage && (
          <button type="button" onClick={() => { void q.fetchNextPage(); }} disabled={q.isFetchingNextPage}>
            {q.isFetchingNextPage ? 'Loading…' : `Load ${PAGE} more`}
          </button>
        )}
      </div>
      <DataTable
        data={rows}
        columns={columns}
        getRowId={(s) => String(s.id)}
        label="Audit results"
        onRowClick={(s) => { void navigate(`/sessions/${String(s.id)}`); }}
        emptyText="No sessions match these filters."
      />
    </section>
  );
}
