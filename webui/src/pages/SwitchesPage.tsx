import { useEffect, useMemo, useState } from 'react';
import { useQuery, useQueryClient } from '@tanstack/react-query';
import { api } from '../api/endpoints';
import { useLive, useLiveSessions } from '../api/live';
import type { SwitchInfo } from '../api/types';
import { ChartCard } from '../components/ChartCard';
import { MaintenancePanel } from '../components/MaintenancePanel';
import { ScrollRegion } from '../components/ScrollRegion';
import { hopName, queueCharts } from '../lib/chartOptions';
import { formatCount, formatMs, formatPercent, formatTime } from '../lib/format';

const WINDOWS = [
  { label: '5 min', seconds: 300, resolution: 1 },
  { label: '1 h', seconds: 3600, resolution: 10 },
  { label: '24 h', seconds: 86400, resolution: 300 },
] as const;

/** Relay table occupancy as the collector last read it from the switch (BfRt
 * table usage of the table's size); each offloaded call holds 4 relay entries
 * (RTP and RTCP, both ways). */
export function Occupancy({ sw, offloadedCalls }: { sw: SwitchInfo; offloadedCalls: number }) {
  const used = sw.relay_table_used;
  const cap = sw.relay_table_capacity;
  const frac = used != null && cap ? used / cap : null;
  return (
    <div>
      {used != null && cap && frac != null ? (
        <>
          <p style={{ margin: '0.2rem 0' }} data-testid="relay-occupancy">
            <strong>{exact.format(used)}</strong> of {exact.format(cap)} relay entries in use ({formatPercent(frac, 1)})
          </p>
          <meter className="occupancy" min={0} max={cap} value={used} low={cap * 0.7} high={cap * 0.9} optimum={0}
            aria-label={`Relay table occupancy of ${sw.name}`}>
            {formatPercent(frac, 1)}
          </meter>
        </>
      ) : (
        <p className="muted" style={{ margin: '0.2rem 0' }} data-testid="relay-occupancy">
          Occupancy of {sw.name}&apos;s relay table: not reported yet (the collector reads it from the switch).
        </p>
      )}
      <p className="muted" style={{ margin: '0.3rem 0 0' }}>
        {formatCount(offloadedCalls)} offloaded calls in the live feed
      </p>
    </div>
  );
}

const exact = new Intl.NumberFormat('en-US');

export default function SwitchesPage() {
  const switches = useQuery({ queryKey: ['switches'], queryFn: api.switches, refetchInterval: 5000 });
  const sessions = useLiveSessions();
  const { onMessage, congestion } = useLive();
  const qc = useQueryClient();
  const [selected, setSelected] = useState<number | null>(null);
  const [win, setWin] = useState<(typeof WINDOWS)[number]>(WINDOWS[0]);
  const current = switches.data?.find((s) => s.id === selected) ?? switches.data?.[0];

  const series = useQuery({
    queryKey: ['queues', current?.id, win.seconds],
    queryFn: async () => {
      // The window the charts show is the one asked for: [from, answer time].
      const from = Date.now() - win.seconds * 1000;
      const data = await api.queueSeries(current?.id ?? 0, new Date(from).toISOString(), win.resolution);
      // Buckets start at a multiple of the resolution, up to one before `from`.
      return { from: from - win.resolution * 1000, to: Date.now(), data };
    },
    enabled: current != null,
    // New samples are announced on the live stream; this is the fallback.
    refetchInterval: 5000,
  });
  // iRED drops (points on the drops chart) and congestion episodes (shaded on depth/delay).
  const ired = useQuery({
    queryKey: ['events', 'switch', current?.name, win.seconds],
    queryFn: () => api.events({
      type: ['ired_drop'], switch: current?.name,
      since: new Date(Date.now() - win.seconds * 1000).toISOString(), limit: 1000,
    }),
    enabled: current != null,
    refetchInterval: 5000,
  });
  const episodes = useQuery({
    // Re-read when the open episodes change (the stream's congestion events).
    queryKey: ['congestion', current?.name, win.seconds, [...congestion.keys()].join(',')],
    queryFn: () => api.congestion({
      switch: current?.name, since: new Date(Date.now() - win.seconds * 1000).toISOString(),
    }),
    enabled: current != null,
    refetchInterval: 5000,
  });

  // Every switch's queues side by side: the hops a call's media crosses
  // (INT reports each hop's queue; the collector's polls each port's).
  const hops = useQuery({
    queryKey: ['hops', win.seconds],
    queryFn: async () => {
      const from = Date.now() - win.seconds * 1000;
      const data = await api.hopSeries(new Date(from).toISOString(), win.resolution);
      return { from: from - win.resolution * 1000, to: Date.now(), data };
    },
    refetchInterval: 5000,
  });

  // Re-fetch (downsampled) series when the stream says this switch has new samples.
  useEffect(() => {
    if (!current) return;
    let pending: ReturnType<typeof setTimeout> | undefined;
    const off = onMessage((m) => {
      if (m.topic !== 'queues' || pending) return;
      const mine = m.items.some((q) => q.switch_id === current.id);
      pending = setTimeout(() => {
        pending = undefined;
        if (mine) void qc.invalidateQueries({ queryKey: ['queues', current.id] });
        void qc.invalidateQueries({ queryKey: ['hops'] });
      }, 500);
    });
    return () => {
      off();
      clearTimeout(pending);
    };
  }, [current, onMessage, qc]);

  // The window the operator picked, as asked of the server: never ECharts' own guess.
  const charts = useMemo(() => {
    const window = series.data ? { from: series.data.from, to: series.data.to } : undefined;
    return queueCharts(series.data?.data ?? [], ired.data?.items ?? [], { window, episodes: episodes.data ?? [], now: window?.to });
  }, [series.data, ired.data, episodes.data]);
  const hopCharts = useMemo(() => {
    const window = hops.data ? { from: hops.data.from, to: hops.data.to } : undefined;
    return queueCharts(hops.data?.data ?? [], [], { window, episodes: [], hops: true });
  }, [hops.data]);
  const latestHops = useMemo(() => (hops.data?.data ?? []).map((h) => {
    const last = h.points[h.points.length - 1];
    const deepest = Math.max(0, ...h.points.map((p) => p.depth_bytes ?? 0));
    return { name: hopName(h), last, deepest };
  }), [hops.data]);
  const offloadedBySwitch = useMemo(() => {
    const m = new Map<string, number>();
    for (const s of sessions) if (s.offloaded && s.switch) m.set(s.switch, (m.get(s.switch) ?? 0) + 1);
    return m;
  }, [sessions]);

  if (switches.isPending) return <p className="muted">Loading switches…</p>;
  if (switches.isError) return <p className="error" role="alert">Could not load switches: {switches.error.message}</p>;
  if (!current) return <p className="muted">No switches registered yet.</p>;
  const empty = (series.data?.data ?? []).every((s) => s.points.length === 0);
  const hopsEmpty = (hops.data?.data ?? []).every((s) => s.points.length === 0);

  return (
    <section className="page" aria-labelledby="sw-title">
      <div className="toolbar">
        <h1 id="sw-title" style={{ marginRight: 'auto' }}>Switches</h1>
        <label className="field">
          Switch
          <select value={current.id} onChange={(e) => { setSelected(Number(e.target.value)); }}>
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
        <section className="card" aria-label="Switch status">
          <h2>{current.name} <span className={`badge ${current.up ? 'good' : 'bad'}`}>{current.up ? 'up' : 'down'}</span></h2>
          <dl className="facts">
            <dt>BfRt gRPC</dt><dd className="mono">{current.grpc_address ?? '–'} (device {current.device_id})</dd>
            <dt>Last seen</dt><dd>{formatTime(current.last_seen)}</dd>
          </dl>
          <h2 style={{ marginTop: '0.8rem' }}>Relay table</h2>
          <Occupancy sw={current} offloadedCalls={offloadedBySwitch.get(current.name) ?? 0} />
          <h2 style={{ marginTop: '0.8rem' }}>Maintenance and capacity</h2>
          <MaintenancePanel switchId={current.id} />
          <h2 style={{ marginTop: '0.8rem' }}>Ports</h2>
          <ScrollRegion label="Ports">
            <table className="data" aria-label="Ports">
              <thead><tr><th scope="col">Port</th><th scope="col">Name</th><th scope="col">Speed</th><th scope="col">Link</th></tr></thead>
              <tbody>
                {current.ports.map((p) => (
                  <tr key={p.dev_port}>
                    <td>{p.dev_port}</td><td>{p.name ?? '–'}</td>
                    <td>{p.speed_mbps == null ? '–' : `${formatCount(p.speed_mbps)} Mb/s`}</td>
                    <td>{p.up == null ? '–' : p.up ? 'up' : 'down'}</td>
                  </tr>
                ))}
                {current.ports.length === 0 && <tr><td colSpan={4} className="muted">No ports reported.</td></tr>}
              </tbody>
            </table>
          </ScrollRegion>
        </section>
        <ChartCard title="Drops (tail and iRED)" option={charts.drops} empty={empty && !(ired.data?.items.some((e) => e.type === 'ired_drop') ?? false)} />
      </div>
      {series.isError && <p className="error" role="alert">Could not load queue telemetry: {series.error.message}</p>}
      <div className="grid-2">
        <ChartCard title="Queue depth per port" option={charts.depth} empty={empty} />
        <ChartCard title="Queueing delay per port" option={charts.delay} empty={empty} />
        <ChartCard title="Port utilisation" option={charts.utilisation} empty={empty} />
      </div>
      <h2>Every hop</h2>
      {hops.isError && <p className="error" role="alert">Could not load the hops&apos; queues: {hops.error.message}</p>}
      <div className="grid-2">
        <ChartCard title="Queue depth per hop" option={hopCharts.depth} empty={hopsEmpty} />
        <ChartCard title="Queueing delay per hop" option={hopCharts.delay} empty={hopsEmpty} />
        <section className="card" aria-label="Hops">
          <ScrollRegion label="Hops (table)">
            <table className="data" aria-label="Hops">
              <thead>
                <tr>
                  <th scope="col">Hop</th><th scope="col" className="num">Depth now</th>
                  <th scope="col" className="num">Deepest</th><th scope="col" className="num">Delay now</th><th scope="col">At</th>
                </tr>
              </thead>
              <tbody>
                {latestHops.map((h) => (
                  <tr key={h.name}>
                    <td>{h.name}</td>
                    <td className="num">{h.last?.depth_bytes == null ? '–' : `${formatCount(Math.round(h.last.depth_bytes / 1024))} KiB`}</td>
                    <td className="num">{`${formatCount(Math.round(h.deepest / 1024))} KiB`}</td>
                    <td className="num">{h.last?.queue_delay_us == null ? '–' : formatMs(h.last.queue_delay_us / 1000)}</td>
                    <td className="nowrap">{formatTime(h.last?.ts)}</td>
                  </tr>
                ))}
                {latestHops.length === 0 && <tr><td colSpan={5} className="muted">No queue samples from any switch in this window.</td></tr>}
              </tbody>
            </table>
          </ScrollRegion>
        </section>
      </div>
    </section>
  );
}
