// The landing page: is the fleet healthy, at a glance. Everything moves with
// the live stream: quality from the live session rows, calls over the last
// hour from the server's history plus a point per tick from the live rows,
// switch/agent health re-read when the stream announces their data.
import { useEffect, useMemo, useRef, useState } from 'react';
import { Link } from 'react-router';
import { useQuery, useQueryClient } from '@tanstack/react-query';
import { api } from '../api/endpoints';
import { useLive, useLiveSessions } from '../api/live';
import type { Agent, SwitchInfo } from '../api/types';
import { ChartCard } from '../components/ChartCard';
import { CongestionControl } from '../components/CongestionControl';
import { timeSeriesOption, windowAround } from '../lib/chartOptions';
import { episodeKey } from '../lib/congestion';
import { elapsedSeconds, formatCount, formatDuration, formatMs, formatPercent, formatTime } from '../lib/format';
import {
  appendActivity, mosHistogram, mosHistogramOption, notOffloaded, PERCENTILES, qualitySpread, reasonsOption,
  type ActivityPoint,
} from '../lib/overview';
import { summarise } from '../lib/summary';
import { ONE_WAY } from './sessionColumns';

const HOUR = 3_600_000;
const TICK_MS = 10_000;
/** An agent that has not reported for this long is shown as silent. */
const AGENT_SILENT_S = 60;
const BAR = { good: '#2da44e', bad: '#cf222e' };

function age(iso: string | null | undefined, now: number): string {
  const s = elapsedSeconds(iso, null, now);
  return s == null ? 'never' : `${formatDuration(Math.max(0, s))} ago`;
}

/** Re-reads a query when the stream carries a matching message, at most every `ms`. */
function useRefreshOn(key: readonly unknown[], match: (topic: string, items: readonly unknown[]) => boolean, ms: number) {
  const { onMessage } = useLive();
  const qc = useQueryClient();
  const matchRef = useRef(match);
  useEffect(() => { matchRef.current = match; }, [match]);
  const keyStr = JSON.stringify(key);
  useEffect(() => {
    let pending: ReturnType<typeof setTimeout> | undefined;
    const off = onMessage((m) => {
      if (pending || !('items' in m) || !matchRef.current(m.topic, m.items)) return;
      pending = setTimeout(() => {
        pending = undefined;
        void qc.invalidateQueries({ queryKey: JSON.parse(keyStr) as unknown[] });
      }, ms);
    });
    return () => {
      off();
      clearTimeout(pending);
    };
  }, [keyStr, ms, onMessage, qc]);
}

const isHealthEvent = (items: readonly unknown[], prefix: string) =>
  items.some((e) => typeof e === 'object' && e != null && 'type' in e && typeof e.type === 'string' && e.type.startsWith(prefix));

function SwitchHealth({ switches, now }: { switches: readonly SwitchInfo[]; now: number }) {
  return (
    <table className="data" aria-label="Switch health">
      <thead>
        <tr><th scope="col">Switch</th><th scope="col">State</th><th scope="col">Last seen</th><th scope="col">Relay table</th></tr>
      </thead>
      <tbody>
        {switches.map((s) => {
          const frac = s.relay_table_used != null && s.relay_table_capacity ? s.relay_table_used / s.relay_table_capacity : null;
          return (
            <tr key={s.id}>
              <td><Link to="/switches">{s.name}</Link></td>
              <td><span className={`badge ${s.up ? 'good' : 'bad'}`}>{s.up ? 'up' : 'down'}</span></td>
              <td title={formatTime(s.last_seen)}>{age(s.last_seen, now)}</td>
              <td data-testid={`occupancy-${s.name}`}>
                {frac == null ? 'not reported' : (
                  <span className={frac > 0.8 ? 'error-text' : undefined}>
                    {formatPercent(frac, 1)} ({formatCount(s.relay_table_used)} of {formatCount(s.relay_table_capacity)})
                  </span>
                )}
              </td>
            </tr>
          );
        })}
        {switches.length === 0 && <tr><td colSpan={4} className="muted">No switches registered.</td></tr>}
      </tbody>
    </table>
  );
}

function AgentHealth({ agents, now }: { agents: readonly Agent[]; now: number }) {
  return (
    <table className="data" aria-label="Agent health">
      <thead>
        <tr><th scope="col">Agent</th><th scope="col">State</th><th scope="col">Last report</th><th scope="col">Switch</th></tr>
      </thead>
      <tbody>
        {agents.map((a) => {
          const s = elapsedSeconds(a.last_seen, null, now);
          const up = s != null && s <= AGENT_SILENT_S;
          return (
            <tr key={a.id}>
              <td>{a.name}</td>
              <td><span className={`badge ${up ? 'good' : 'poor'}`}>{up ? 'reporting' : 'silent'}</span></td>
              <td title={formatTime(a.last_seen)}>{age(a.last_seen, now)}</td>
              <td>{a.switch ?? '–'}</td>
            </tr>
          );
        })}
        {agents.length === 0 && <tr><td colSpan={4} className="muted">No agents have reported.</td></tr>}
      </tbody>
    </table>
  );
}

export default function OverviewPage() {
  const rows = useLiveSessions();
  const { congestion, status } = useLive();
  const [now, setNow] = useState(() => Date.now());

  // Calls over the last hour: the server's history, then a point per tick from the live rows.
  const history = useQuery({
    queryKey: ['activity'],
    queryFn: () => api.activity(new Date(Date.now() - HOUR).toISOString(), 30),
    staleTime: Infinity,
  });
  const [live, setLive] = useState<ActivityPoint[]>([]);
  const rowsRef = useRef(rows);
  useEffect(() => { rowsRef.current = rows; }, [rows]);
  useEffect(() => {
    const t = setInterval(() => {
      const n = Date.now();
      setNow(n);
      const s = summarise(rowsRef.current);
      const offloaded = rowsRef.current.filter((r) => r.offloaded).length;
      if (status === 'live') setLive((pts) => appendActivity(pts, { ts: n, active: s.active, offloaded }, HOUR));
    }, TICK_MS);
    return () => { clearInterval(t); };
  }, [status]);

  const switches = useQuery({ queryKey: ['switches'], queryFn: api.switches });
  const agents = useQuery({ queryKey: ['agents'], queryFn: api.agents });
  useRefreshOn(['switches'], (topic, items) => topic === 'queues' || (topic === 'events' && isHealthEvent(items, 'switch_')), 2000);
  useRefreshOn(['agents'], (topic, items) => topic === 'sessions' || topic === 'samples' || (topic === 'events' && isHealthEvent(items, 'agent_')), 5000);

  const summary = useMemo(() => summarise(rows), [rows]);
  const hist = useMemo(() => mosHistogram(rows), [rows]);
  const spread = useMemo(() => qualitySpread(rows), [rows]);
  const reasons = useMemo(() => notOffloaded(rows), [rows]);

  const activity = useMemo(() => {
    const lastServer = history.data?.points.at(-1);
    const since = lastServer ? Date.parse(lastServer.ts) : 0;
    const pts: ActivityPoint[] = [
      ...(history.data?.points ?? []).map((p) => ({ ts: Date.parse(p.ts), active: p.active, offloaded: p.offloaded })),
      ...live.filter((p) => p.ts > since),
    ].filter((p) => p.ts >= now - HOUR);
    const window = windowAround(now - HOUR, now, HOUR);
    return {
      calls: timeSeriesOption({
        series: [
          { name: 'active', points: pts.map((p) => [p.ts, p.active]), area: true },
          { name: 'offloaded', points: pts.map((p) => [p.ts, p.offloaded]) },
        ],
        unit: 'calls', yMin: 0, window,
      }),
      share: timeSeriesOption({
        series: [{ name: 'offloaded share', points: pts.map((p) => [p.ts, p.active ? (100 * p.offloaded) / p.active : null]) }],
        unit: '%', yName: 'offloaded %', yMin: 0, yMax: 100, window,
      }),
      empty: pts.length === 0,
    };
  }, [history.data, live, now]);

  const open = Array.from(congestion.values()).sort((a, b) => a.started_at.localeCompare(b.started_at));
  const oneWay = rows.filter((r) => r.one_way).sort((a, b) => a.started_at.localeCompare(b.started_at));
  const underShare = hist.withMos ? hist.under / hist.withMos : null;

  return (
    <section className="page" aria-labelledby="ov-title">
      <div className="toolbar">
        <h1 id="ov-title" style={{ marginRight: 'auto' }}>Overview</h1>
        <Link to="/live">Live sessions table →</Link>
      </div>
      <ul className="kpis" aria-label="Key figures">
        <li><span className="k">Active calls</span><span className="v" data-testid="kpi-active">{formatCount(summary.active)}</span></li>
        <li><span className="k">Offloaded</span><span className="v" data-testid="kpi-offloaded">{formatPercent(summary.offloadedShare, 1)}</span></li>
        <li className={hist.under > 0 ? 'alert' : undefined}>
          <span className="k">Calls under MOS 3.6</span>
          <span className="v" data-testid="kpi-under">{formatPercent(underShare, 1)} <small>({formatCount(hist.under)} of {formatCount(hist.withMos)})</small></span>
        </li>
        <li className={oneWay.length > 0 ? 'alert' : undefined}>
          <span className="k">One-way media</span>
          <span className="v" data-testid="kpi-one-way">{oneWay.length === 0 ? 'none' : `${String(oneWay.length)} call${oneWay.length > 1 ? 's' : ''}`}</span>
        </li>
        <li className={open.length > 0 ? 'alert' : undefined}>
          <span className="k">Open congestion</span>
          <span className="v" data-testid="kpi-congestion">{open.length === 0 ? 'none' : `${String(open.length)} queue${open.length > 1 ? 's' : ''}`}</span>
        </li>
      </ul>
      {history.isError && <p className="error" role="alert">Could not load call history: {history.error.message}</p>}
      <div className="grid-2">
        <ChartCard title="Active and offloaded calls, last hour" option={activity.calls} empty={activity.empty} />
        <ChartCard title="Offload share, last hour" option={activity.share} empty={activity.empty} />
        <ChartCard title="MOS distribution (active calls)" option={mosHistogramOption(hist, BAR)} empty={hist.withMos === 0} />
        <ChartCard title="Calls not offloaded, by reason" option={reasonsOption(reasons)} empty={reasons.length === 0} />
      </div>
      <div className="grid-2">
        <section className="card" aria-label="Loss and jitter percentiles">
          <h2>Loss and jitter over active calls</h2>
          <table className="data" aria-label="Loss and jitter percentiles">
            <thead>
              <tr>
                <th scope="col">Measure</th><th scope="col" className="num">calls</th>
                {PERCENTILES.map((p) => <th key={p} scope="col" className="num">p{Math.round(p * 100)}</th>)}
                <th scope="col" className="num">max</th>
              </tr>
            </thead>
            <tbody>
              <tr data-testid="pct-loss">
                <th scope="row">Packet loss</th><td className="num">{formatCount(spread.loss.n)}</td>
                {spread.loss.p.map((v, i) => <td key={i} className="num">{formatPercent(v, 2)}</td>)}
                <td className="num">{formatPercent(spread.loss.max, 2)}</td>
              </tr>
              <tr data-testid="pct-jitter">
                <th scope="row">Jitter</th><td className="num">{formatCount(spread.jitter.n)}</td>
                {spread.jitter.p.map((v, i) => <td key={i} className="num">{formatMs(v)}</td>)}
                <td className="num">{formatMs(spread.jitter.max)}</td>
              </tr>
            </tbody>
          </table>
        </section>
        <section className="card" aria-label="Open congestion episodes">
          <h2>Open congestion episodes</h2>
          <table className="data" aria-label="Open congestion episodes">
            <thead>
              <tr><th scope="col">Queue</th><th scope="col">Since</th><th scope="col" className="num">Delay at onset</th></tr>
            </thead>
            <tbody>
              {open.map((e) => (
                <tr key={episodeKey(e)}>
                  <td>{episodeKey(e)}</td>
                  <td title={formatTime(e.started_at)}>{age(e.started_at, now)}</td>
                  <td className="num">{e.queue_delay_us == null ? '–' : formatMs(e.queue_delay_us / 1000)}</td>
                </tr>
              ))}
              {open.length === 0 && <tr><td colSpan={3} className="muted">No queue is congested.</td></tr>}
            </tbody>
          </table>
        </section>
        <CongestionControl />
        <section className="card" aria-label="Calls with one-way media">
          <h2>Calls with one-way media</h2>
          <table className="data" aria-label="Calls with one-way media">
            <thead>
              <tr><th scope="col">Call-ID</th><th scope="col">No media</th><th scope="col">Caller</th><th scope="col">Callee</th></tr>
            </thead>
            <tbody>
              {oneWay.map((r) => (
                <tr key={r.id}>
                  <td><Link to={`/sessions/${String(r.id)}`}>{r.call_id}</Link></td>
                  <td>{r.one_way ? ONE_WAY[r.one_way] : '–'}</td>
                  <td className="mono">{r.caller ?? '–'}</td>
                  <td className="mono">{r.callee ?? '–'}</td>
                </tr>
              ))}
              {oneWay.length === 0 && <tr><td colSpan={4} className="muted">Every active call carries media both ways.</td></tr>}
            </tbody>
          </table>
        </section>
        <section className="card" aria-label="Switches">
          <h2>Switches</h2>
          {switches.isError ? <p className="error" role="alert">{switches.error.message}</p> : <SwitchHealth switches={switches.data ?? []} now={now} />}
        </section>
        <section className="card" aria-label="Agents">
          <h2>Agents</h2>
          {agents.isError ? <p className="error" role="alert">{agents.error.message}</p> : <AgentHealth agents={agents.data ?? []} now={now} />}
        </section>
      </div>
    </section>
  );
}
