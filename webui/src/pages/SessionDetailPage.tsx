import { Fragment, useEffect, useMemo } from 'react';
import { Link, useParams } from 'react-router';
import { useQuery, useQueryClient } from '@tanstack/react-query';
import { api } from '../api/endpoints';
import { useLive } from '../api/live';
import type { LiveMessage } from '../api/liveMessages';
import { ChartCard } from '../components/ChartCard';
import EventTimeline from '../components/EventTimeline';
import { MosBadge } from '../components/MosBadge';
import { ScrollRegion } from '../components/ScrollRegion';
import { eventSummary, pathLabel, pathOption, pathWhy, qualityCharts, qualityWindow } from '../lib/chartOptions';
import Chart from '../components/Chart';
import type { Direction, Leg, QualitySeries } from '../api/types';
import { elapsedSeconds, formatClock, formatCount, formatDuration, formatEndpoint, formatMs, formatTime } from '../lib/format';

const DIRECTION = { caller_to_callee: 'caller → callee', callee_to_caller: 'callee → caller' } as const;
const DIRECTIONS: readonly Direction[] = ['caller_to_callee', 'callee_to_caller'];

interface DirectionQuality { packets: number; lost: number; mos: number | null }

/** Per direction: packets and lost over the samples, MOS weighted by packets. */
function directionQuality(series: readonly QualitySeries[]): Record<Direction, DirectionQuality> {
  const out: Record<Direction, DirectionQuality> = {
    caller_to_callee: { packets: 0, lost: 0, mos: null },
    callee_to_caller: { packets: 0, lost: 0, mos: null },
  };
  const sums = { caller_to_callee: { mos: 0, packets: 0 }, callee_to_caller: { mos: 0, packets: 0 } };
  for (const d of series) {
    const o = out[d.direction];
    const w = sums[d.direction];
    for (const p of d.points) {
      o.packets += p.packets;
      o.lost += p.lost;
      if (p.mos != null && p.packets > 0) { w.mos += p.mos * p.packets; w.packets += p.packets; }
    }
  }
  for (const d of DIRECTIONS) if (sums[d].packets > 0) out[d].mos = sums[d].mos / sums[d].packets;
  return out;
}

/** The call's parties as media endpoints: the caller→callee leg's source and destination. */
function parties(legs: readonly Leg[]): string {
  const leg = legs.find((l) => l.direction === 'caller_to_callee') ?? legs[0];
  if (!leg) return '–';
  const [a, b] = leg.direction === 'caller_to_callee' ? [leg.src, leg.dst] : [leg.dst, leg.src];
  return `${formatEndpoint(a.addr, a.port)} → ${formatEndpoint(b.addr, b.port)}`;
}
import { offloadLabel } from './sessionColumns';

export default function SessionDetailPage() {
  const { id = '' } = useParams();
  const sessionId = Number(id);
  const q = useQuery({
    queryKey: ['session', sessionId],
    queryFn: () => api.session(sessionId),
    enabled: Number.isInteger(sessionId) && sessionId > 0,
    // The live stream triggers refreshes (below); this is the fallback. Ended calls are history.
    refetchInterval: (query) => (query.state.data?.ended_at ? false : 10_000),
  });
  const { onMessage } = useLive();
  const qc = useQueryClient();
  const live = q.data != null && q.data.ended_at == null;
  // New samples, state changes or events of this call: re-fetch (at most twice a second).
  useEffect(() => {
    let pending: ReturnType<typeof setTimeout> | undefined;
    const mine = (m: LiveMessage) =>
      (m.topic === 'samples' && m.items.some((x) => x.session_id === sessionId)) ||
      (m.topic === 'sessions' && m.items.some((x) => x.id === sessionId)) ||
      (m.topic === 'events' && m.items.some((x) => x.session_id === sessionId)) ||
      // A reroute names a watched destination, not a call: the server links it to this one.
      (m.topic === 'events' && live && m.items.some((x) => x.type === 'reroute'));
    const off = onMessage((m) => {
      if (pending || !mine(m)) return;
      pending = setTimeout(() => {
        pending = undefined;
        void qc.invalidateQueries({ queryKey: ['session', sessionId] });
      }, 500);
    });
    return () => {
      off();
      clearTimeout(pending);
    };
  }, [sessionId, onMessage, qc, live]);
  // x window: the call's samples (to now while it is up), not ECharts' guess.
  const fetchedAt = q.dataUpdatedAt;
  const charts = useMemo(() => {
    const d = q.data;
    if (!d) return null;
    const window = qualityWindow(d.quality, d, fetchedAt);
    const own = new Set(d.events.map((e) => e.id));
    const events = [...d.events, ...d.reroutes.filter((e) => !own.has(e.id))];
    return {
      ...qualityCharts(d.quality, events, { window, congestion: d.congestion }),
      path: d.path.length ? pathOption(d.path, window, fetchedAt) : null,
    };
  }, [q.data, fetchedAt]);
  // Active calls have no final counters yet: sum what the samples say (per direction too).
  const sampled = useMemo(() => {
    let packets = 0;
    let lost = 0;
    for (const d of q.data?.quality ?? []) for (const p of d.points) { packets += p.packets; lost += p.lost; }
    return { packets, lost, dirs: directionQuality(q.data?.quality ?? []) };
  }, [q.data?.quality]);

  if (!Number.isInteger(sessionId) || sessionId <= 0) return <p className="error" role="alert">No such session: {id}</p>;
  if (q.isPending) return <p className="muted">Loading session…</p>;
  if (q.isError) return <p className="error" role="alert">Could not load session: {q.error.message}</p>;
  const s = q.data;
  const empty = s.quality.every((d) => d.points.length === 0);
  if (!charts) return null;

  return (
    <article className="page" aria-labelledby="sd-title">
      <p><Link to="/live">← Live sessions</Link></p>
      <h1 id="sd-title">Session <code>{s.call_id}</code></h1>
      <div className="grid-detail">
        <section className="card" aria-label="Summary">
          <dl className="facts">
            <dt>State</dt>
            <dd>
              {s.state}
              {s.one_way && (
                <> <span className="badge bad" data-testid="session-one-way">one-way media: no media {DIRECTION[s.one_way]}</span></>
              )}
            </dd>
            <dt>Relayed by</dt><dd>{offloadLabel(s)}</dd>
            <dt>Switch / agent</dt><dd>{s.switch ?? '–'} / {s.agent ?? '–'}</dd>
            <dt>Caller → callee</dt><dd className="mono">{parties(s.legs)}</dd>
            <dt>Tags (from / to)</dt><dd className="mono">{s.from_tag || '–'} / {s.to_tag ?? '–'}</dd>
            <dt>Codec</dt><dd>{s.codec ?? '–'}{s.plc ? ' (PLC)' : ''}</dd>
            <dt>Started</dt><dd>{formatTime(s.started_at)}</dd>
            <dt>Answered</dt><dd>{formatTime(s.answered_at)}</dd>
            <dt>Ended</dt><dd>{formatTime(s.ended_at)}</dd>
            <dt>Duration</dt><dd>{formatDuration(elapsedSeconds(s.answered_at ?? s.started_at, s.ended_at))}</dd>
            {/* The server's counters: running sums of samples while active, the agent's totals at the end. */}
            <dt>Packets / lost{s.ended_at == null ? ' (so far)' : ''}</dt>
            <dd data-testid="session-packets">
              {formatCount(s.packets ?? sampled.packets)} / {formatCount(s.lost ?? sampled.lost)}
            </dd>
            <dt>Max jitter</dt><dd>{formatMs(s.jitter_ms_max)}</dd>
            <dt>MOS mean / min</dt><dd><MosBadge mos={s.mos_avg} /> / <MosBadge mos={s.mos_min} /></dd>
            {DIRECTIONS.map((d) => {
              const q = sampled.dirs[d];
              const other = sampled.dirs[d === 'caller_to_callee' ? 'callee_to_caller' : 'caller_to_callee'];
              // No media: silent now (one_way), or never a packet while the other side sent.
              const none = s.one_way === d || (q.packets === 0 && other.packets > 0);
              return (
                <Fragment key={d}>
                  <dt>Quality {DIRECTION[d]}</dt>
                  <dd data-testid={`quality-${d}`}>
                    {none
                      ? <span className="badge bad">no media</span>
                      : <><MosBadge mos={q.mos} /> <span className="muted">({formatCount(q.packets)} packets, {formatCount(q.lost)} lost)</span></>}
                  </dd>
                </Fragment>
              );
            })}
          </dl>
        </section>
        <section className="card" aria-label="Legs and rewrite entries">
          <h2>Legs and rewrite entries</h2>
          <p className="muted" style={{ marginTop: 0 }}>
            A packet from <em>source</em> to <em>relay in</em> leaves the switch rewritten as <em>relay out</em> → <em>destination</em>.
          </p>
          <ScrollRegion label="Legs and rewrite entries (table)">
            <table className="data" aria-label="Legs and rewrite entries">
              <thead>
                <tr>
                  <th scope="col">Direction</th><th scope="col">Source</th><th scope="col">Relay in</th>
                  <th scope="col">Relay out</th><th scope="col">Destination</th><th scope="col">Switch entry</th>
                  <th scope="col">Installed</th><th scope="col">Removed</th><th scope="col" className="num">Packets</th>
                </tr>
              </thead>
              <tbody>
                {s.legs.map((l) => (
                  <tr key={`${l.direction}-${String(l.media_index)}`}>
                    <td>{DIRECTION[l.direction]}{l.media_index ? ` #${String(l.media_index)}` : ''}</td>
                    <td className="mono">{formatEndpoint(l.src.addr, l.src.port)}</td>
                    <td className="mono">{formatEndpoint(l.relay_in.addr, l.relay_in.port)}</td>
                    <td className="mono">{formatEndpoint(l.relay_out.addr, l.relay_out.port)}</td>
                    <td className="mono">{formatEndpoint(l.dst.addr, l.dst.port)}</td>
                    <td>{l.installed ? `leg ${l.switch_leg == null ? '?' : String(l.switch_leg)}` : 'not installed'}</td>
                    <td className="nowrap" title={l.installed_at ?? undefined}>{formatClock(l.installed_at)}</td>
                    <td className="nowrap" title={l.removed_at ?? undefined}>{formatClock(l.removed_at)}</td>
                    {/* Active: the samples' running sum of the direction, as the summary's total above. */}
                    <td className="num">{formatCount(s.packets == null ? sampled.dirs[l.direction].packets : l.packets)}</td>
                  </tr>
                ))}
                {s.legs.length === 0 && <tr><td colSpan={9} className="muted">No legs recorded.</td></tr>}
              </tbody>
            </table>
          </ScrollRegion>
        </section>
      </div>
      {s.congestion.length > 0 && (
        <p className="muted" data-testid="session-congestion">
          Shaded on the charts: {s.congestion.map((e) => `${e.switch ?? '?'} port ${e.dev_port == null ? '?' : String(e.dev_port)} congested ${formatClock(e.started_at)}–${e.ended_at ? formatClock(e.ended_at) : 'now'}`).join('; ')}
        </p>
      )}
      <div className="grid-2">
        <ChartCard title="MOS over time" option={charts.mos} empty={empty} />
        <ChartCard title="Packet loss per direction" option={charts.loss} empty={empty} />
        <ChartCard title="Jitter per direction" option={charts.jitter} empty={empty} />
        <ChartCard title="Packets per direction" option={charts.packets} empty={empty} />
      </div>
      <section className="card" aria-label="Path and reroutes" data-testid="session-path">
        <h2>Path and reroutes</h2>
        {s.path.length === 0 ? (
          <p className="muted">Its media was not traced (INT) and no reroute concerned it: it kept the switch&apos;s primary next hop.</p>
        ) : (
          <>
            {charts.path && <Chart option={charts.path} label="Call path over time" className="chart" />}
            <ScrollRegion label="Path segments (table)">
              <table className="data" aria-label="Path segments">
                <thead>
                  <tr>
                    <th scope="col">Switch</th><th scope="col">Flow</th><th scope="col">Path</th>
                    <th scope="col">From</th><th scope="col">Until</th><th scope="col">Congestion seen at</th><th scope="col">Why</th>
                  </tr>
                </thead>
                <tbody>
                  {s.path.map((p) => (
                    <tr key={`${pathLabel(p)}-${p.since}`}>
                      <td>{p.switch ?? '–'}</td>
                      <td className="mono">{p.flow}</td>
                      <td className="mono">{p.path}</td>
                      <td className="nowrap" title={p.since}>{formatClock(p.since)}</td>
                      <td className="nowrap" title={p.until ?? undefined}>{p.until ? formatClock(p.until) : s.ended_at ? '–' : 'now'}</td>
                      <td className="mono">{p.congested_hop ?? '–'}</td>
                      <td style={{ whiteSpace: 'normal' }}>{pathWhy(p)}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </ScrollRegion>
          </>
        )}
        {s.reroutes.length > 0 && (
          <ul className="muted" aria-label="Reroutes of this call">
            {s.reroutes.map((e) => <li key={e.id}>{formatClock(e.ts)} {e.switch ?? '?'}: {eventSummary(e)}</li>)}
          </ul>
        )}
      </section>
      <section className="card" aria-label="Session events">
        <h2>Events</h2>
        <EventTimeline events={s.events} label="Session events timeline" />
      </section>
    </article>
  );
}
