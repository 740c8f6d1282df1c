import { useMemo, useState } from 'react';
import { useQuery } from '@tanstack/react-query';
import { api } from '../api/endpoints';
import type { SwitchInfo } from '../api/types';
import { ChartCard } from '../components/ChartCard';
import { queueCharts } from '../lib/chartOptions';
import { formatCount, formatPercent } from '../lib/format';

const WINDOWS = [
  { label: '5 min', seconds: 300, resolution: 1 },
  { label: '1 h', seconds: 3600, resolution: 10 },
  { label: '24 h', seconds: 86400, resolution: 300 },
] as const;

function Occupancy({ sw }: { sw: SwitchInfo }) {
  const used = sw.relay_table_used ?? 0;
  const cap = sw.relay_table_capacity ?? 0;
  const frac = cap > 0 ? used / cap : null;
  return (
    <div>
      <div className="meter" role="meter" aria-label={`Relay table occupancy of ${sw.name}`}
        aria-valuemin={0} aria-valuemax={cap} aria-valuenow={used}>
        <span style={{ width: `${Math.min(100, (frac ?? 0) * 100).toFixed(1)}%` }} />
      </div>
      <p className="muted" style={{ margin: '0.3rem 0 0' }}>
        {formatCount(used)} of {cap ? formatCount(cap) : '?'} entries ({formatPercent(frac)})
      </p>
    </div>
  );
}

export default function SwitchesPage() {
  const switches = useQuery({ queryKey: ['switches'], queryFn: api.switches, refetchInterval: 5000 });
  const [selected, setSelected] = useState<string | null>(null);
  const [win, setWin] = useState<(typeof WINDOWS)[number]>(WINDOWS[0]);
  const current = switches.data?.find((s) => s.id === selected) ?? switches.data?.[0];

  const series = useQuery({
    queryKey: ['queues', current?.id, win.seconds],
    queryFn: () =>
      api.queueSeries(current?.id ?? '', new Date(Date.now() - win.seconds * 1000).toISOString(), win.resolution),
    enabled: current != null,
    refetchInterval: 2000,
  });
  const charts = useMemo(() => queueCharts(series.data ?? []), [series.data]);

  if (switches.isPending) return <p className="muted">Loading switches…</p>;
  if (switches.isError) return <p className="error" role="alert">Could not load switches: {switches.error.message}</p>;
  if (!current) return <p className="muted">No switches registered yet.</p>;
  const empty = (series.data?.length ?? 0) === 0;

  return (
    <section className="page" aria-labelledby="sw-title">
      <div className="toolbar">
        <h1 id="sw-title" style={{ marginRight: 'auto' }}>Switches</h1>
        <label className="field">
          Switch
          <select value={current.id} onChange={(e) => { setSelected(e.target.value); }}>
            {switches.data.map((s) => <option key={s.id} value={s.id}>{s.name}</option>)}
          </select>
        </label>
        <label className="field">
          Window
          <select value={win.label} onChange={(e) => { setWin(WINDOWS.find((w) => w.label === e.target.value) ?? WINDOWS[0]); }}>
            {WINDOWS.map((w) => <option key={w.label}>{w.label}</option>)}
          </select>
        </label>
      </div>
      <div className="grid-2">
        <section className="card" aria-label="Relay table">
          <h2>Relay table occupancy</h2>
          {switches.data.map((s) => (
            <div key={s.id} style={{ marginBottom: '0.6rem' }}>
              <strong>{s.name}</strong>
              <Occupancy sw={s} />
            </div>
          ))}
        </section>
        <ChartCard title="Drops (tail and iRED)" option={charts.drops} empty={empty} />
      </div>
      {series.isError && <p className="error" role="alert">Could not load queue telemetry: {series.error.message}</p>}
      <div className="grid-2">
        <ChartCard title="Queue depth per port" option={charts.depth} empty={empty} />
        <ChartCard title="Queueing delay per port" option={charts.delay} empty={empty} />
        <ChartCard title="Port utilisation" option={charts.utilisation} empty={empty} />
      </div>
    </section>
  );
}
