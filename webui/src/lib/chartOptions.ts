// Pure builders of ECharts options (unit-tested without a browser).
import type { CongestionEpisode, EventItem, EventType, PathSegment, QualitySeries, QueueSeries } from '../api/types';

type Point = [number, number | null];

export interface SeriesSpec {
  name: string;
  points: Point[];
  area?: boolean;
  /** line (default), bar (per-interval counts) or scatter (discrete events). */
  kind?: 'line' | 'bar' | 'scatter';
}

/** Groups samples by a key and extracts one numeric field as time-ordered points. */
export function seriesBy<T extends { ts: string }>(
  samples: readonly T[],
  key: (s: T) => string,
  value: (s: T) => number | null | undefined,
): SeriesSpec[] {
  const groups = new Map<string, Point[]>();
  for (const s of samples) {
    const t = Date.parse(s.ts);
    if (Number.isNaN(t)) continue;
    const k = key(s);
    let g = groups.get(k);
    if (!g) groups.set(k, (g = []));
    const v = value(s);
    g.push([t, v == null || !Number.isFinite(v) ? null : v]);
  }
  return Array.from(groups, ([name, points]) => ({ name, points: points.sort((a, b) => a[0] - b[0]) }));
}

export function timeSeriesOption(opts: {
  series: SeriesSpec[];
  unit: string;
  yName?: string;
  yMax?: number;
  yMin?: number;
  markLineY?: { value: number; label: string };
  /** Vertical markers (e.g. reroutes) across the chart. */
  markLinesX?: { ts: number; label: string }[];
  /** Shaded time spans (e.g. congestion episodes). */
  markAreasX?: { from: number; to: number; label: string }[];
  stepped?: boolean;
  /** The x window (ms). Without one ECharts picks its own: a single timestamp
   * becomes a two-day axis with the data lost in the middle. */
  window?: TimeWindow;
}): Record<string, unknown> {
  // A label is about a quarter of a chart wide: spans closer than that share one.
  const gap = opts.window ? (opts.window.to - opts.window.from) / 4 : 0;
  const areas = mergeOverlapping(opts.markAreasX ?? [], gap).map((a) => [{ xAxis: a.from, name: a.label }, { xAxis: a.to }]);
  const marks = [
    ...(opts.markLineY ? [{ yAxis: opts.markLineY.value, label: { formatter: opts.markLineY.label, position: 'insideEndTop' } }] : []),
    ...(opts.markLinesX ?? []).map((m) => ({ xAxis: m.ts, label: { formatter: m.label, position: 'insideEndTop' } })),
  ];
  return {
    animation: false,
    grid: { left: 56, right: 16, top: 48, bottom: 36 },
    legend: { type: 'scroll', top: 0 },
    tooltip: {
      trigger: 'axis',
      valueFormatter: (v: unknown) => (typeof v === 'number' ? `${+v.toFixed(3)} ${opts.unit}`.trim() : '–'),
    },
    xAxis: { type: 'time', axisLabel: { hideOverlap: true }, min: opts.window?.from, max: opts.window?.to },
    yAxis: { type: 'value', name: opts.yName ?? opts.unit, min: opts.yMin, max: opts.yMax, scale: opts.yMin == null },
    series: opts.series.map((s, i) => ({
      name: s.name,
      type: s.kind ?? 'line',
      showSymbol: s.kind === 'scatter' || s.points.length < 40,
      symbolSize: s.kind === 'scatter' ? 10 : undefined,
      barMaxWidth: 6,
      step: opts.stepped && (s.kind ?? 'line') === 'line' ? 'end' : undefined,
      connectNulls: false,
      areaStyle: s.area ? { opacity: 0.15 } : undefined,
      data: s.points,
      markLine:
        i === 0 && marks.length
          ? { silent: true, symbol: 'none', lineStyle: { type: 'dashed' }, data: marks }
          : undefined,
      markArea:
        i === 0 && areas.length
          ? { silent: true, itemStyle: { color: 'rgba(209, 36, 47, 0.12)' }, label: { position: 'insideTop', fontSize: 11, color: '#d1242f' }, data: areas }
          : undefined,
    })),
  };
}

/** Time spans that overlap, or lie less than `gap` apart, become one span
 * naming them all: their labels would otherwise be drawn on top of each other. */
export function mergeOverlapping(
  spans: readonly { from: number; to: number; label: string }[],
  gap = 0,
): { from: number; to: number; label: string }[] {
  const out: { from: number; to: number; labels: string[] }[] = [];
  for (const a of [...spans].sort((x, y) => x.from - y.from)) {
    const last = out[out.length - 1];
    if (last && a.from <= last.to + gap) {
      last.to = Math.max(last.to, a.to);
      if (!last.labels.includes(a.label)) last.labels.push(a.label);
    } else {
      out.push({ from: a.from, to: a.to, labels: [a.label] });
    }
  }
  return out.map((a) => ({ from: a.from, to: a.to, label: a.labels.join(' · ') }));
}

export interface TimeWindow {
  from: number;
  to: number;
}

/** A window around [lo, hi] (ms): at least `minSpanMs` wide (a young call's
 * few samples sit at the left of a growing window), padded by 3 % each side. */
export function windowAround(lo: number, hi: number, minSpanMs = 60_000): TimeWindow {
  const span = Math.max(hi - lo, minSpanMs);
  const pad = span * 0.03;
  return { from: lo - pad, to: lo + span + pad };
}

/** The quality charts' window: the call's first sample (or its start) to its
 * end, or to now while it is up. */
export function qualityWindow(
  series: readonly QualitySeries[],
  call: { started_at: string; ended_at?: string | null },
  now = Date.now(),
): TimeWindow {
  const times = series.flatMap((s) => s.points.map((p) => Date.parse(p.ts))).filter((t) => !Number.isNaN(t));
  const started = Date.parse(call.started_at);
  const lo = times.length ? Math.min(...times) : started;
  const last = times.length ? Math.max(...times) : started;
  const ended = call.ended_at ? Date.parse(call.ended_at) : NaN;
  const hi = Number.isNaN(ended) ? Math.max(last, now) : Math.max(last, Math.min(ended, last + 60_000));
  return windowAround(Number.isNaN(lo) ? now : lo, Number.isNaN(hi) ? now : hi);
}

/** Congestion episodes as shaded spans, clipped to the window. */
export function episodeAreas(episodes: readonly CongestionEpisode[], w: TimeWindow): { from: number; to: number; label: string }[] {
  return episodes
    .map((e) => ({
      from: Math.max(Date.parse(e.started_at), w.from),
      to: Math.min(e.ended_at ? Date.parse(e.ended_at) : w.to, w.to),
      label: `${e.switch ?? '?'} port ${e.dev_port == null ? '?' : String(e.dev_port)} congested`,
    }))
    .filter((a) => !Number.isNaN(a.from) && !Number.isNaN(a.to) && a.to > a.from);
}

const DIRECTION_LABEL: Record<string, string> = {
  caller_to_callee: 'caller → callee',
  callee_to_caller: 'callee → caller',
};

/** One chart series per series-with-points, extracting one numeric field. */
export function pointsOf<P extends { ts: string }>(
  points: readonly P[],
  value: (p: P) => number | null | undefined,
): Point[] {
  return seriesBy(points, () => '', value)[0]?.points ?? [];
}

export function qualityCharts(
  series: readonly QualitySeries[],
  events: readonly EventItem[] = [],
  opts: { window?: TimeWindow; congestion?: readonly CongestionEpisode[] } = {},
) {
  const window = opts.window;
  // Reroutes drawn across every quality chart, congestion shaded: cause next to effect.
  const markLinesX = events
    .filter((e) => e.type === 'reroute')
    .map((e) => ({ ts: Date.parse(e.ts), label: 'reroute' }))
    .filter((m) => !Number.isNaN(m.ts) && (!window || (m.ts >= window.from && m.ts <= window.to)));
  const markAreasX = window ? episodeAreas(opts.congestion ?? [], window) : [];
  const spec = (value: (p: QualitySeries['points'][number]) => number | null | undefined): SeriesSpec[] =>
    series.map((s) => ({ name: DIRECTION_LABEL[s.direction] ?? s.direction, points: pointsOf(s.points, value) }));
  const common = { markLinesX, markAreasX, window };
  return {
    mos: timeSeriesOption({
      series: spec((p) => p.mos), unit: '', yName: 'MOS', yMin: 1, yMax: 5,
      markLineY: { value: 3.6, label: 'MOS 3.6' }, ...common,
    }),
    loss: timeSeriesOption({ series: spec((p) => p.loss_pct), unit: '%', yName: 'loss %', yMin: 0, ...common }),
    jitter: timeSeriesOption({ series: spec((p) => p.jitter_ms), unit: 'ms', yName: 'jitter ms', yMin: 0, ...common }),
    packets: timeSeriesOption({ series: spec((p) => p.packets), unit: 'pkts', yName: 'packets / interval', yMin: 0, ...common }),
  };
}

/** Congestion episodes per port from onset/clear events; one still open runs to `now`. */
export function congestionEpisodes(events: readonly EventItem[], now: number): { from: number; to: number; label: string }[] {
  const open = new Map<string, number>();
  const out: { from: number; to: number; label: string }[] = [];
  const sorted = events
    .filter((e) => e.type === 'congestion_onset' || e.type === 'congestion_clear')
    .sort((a, b) => a.ts.localeCompare(b.ts));
  for (const e of sorted) {
    const port = `port ${String(e.payload.dev_port)}`;
    const t = Date.parse(e.ts);
    if (Number.isNaN(t)) continue;
    if (e.type === 'congestion_onset') {
      if (!open.has(port)) open.set(port, t);
    } else {
      const from = open.get(port);
      if (from != null) out.push({ from, to: t, label: `${port} congested` });
      open.delete(port);
    }
  }
  for (const [port, from] of open) out.push({ from, to: Math.max(from, now), label: `${port} congested` });
  return out;
}

/** Queue depth in the unit the samples carry: the collector reads bytes (cells
 * × 80 B); packets only where a source reports packets and no bytes. */
export function depthUnit(series: readonly QueueSeries[]): 'KiB' | 'pkts' {
  const has = (f: (p: QueueSeries['points'][number]) => number | null) =>
    series.some((s) => s.points.some((p) => f(p) != null));
  return has((p) => p.depth_bytes) || !has((p) => p.depth_pkts) ? 'KiB' : 'pkts';
}

export function queueCharts(
  series: readonly QueueSeries[],
  events: readonly EventItem[] = [],
  opts: { now?: number; window?: TimeWindow; episodes?: readonly CongestionEpisode[]; hops?: boolean } = {},
) {
  const window = opts.window;
  // The server's episodes (onsets before the window included) when given, else paired from the events.
  const markAreasX = opts.episodes && window
    ? episodeAreas(opts.episodes, window)
    : congestionEpisodes(events, opts.now ?? Date.now());
  // One switch: its ports; every switch (hops): switch and port.
  const name = opts.hops ? hopName : (s: QueueSeries) => `port ${s.dev_port}${s.queue ? ` q${s.queue}` : ''}`;
  const spec = (value: (p: QueueSeries['points'][number]) => number | null | undefined): SeriesSpec[] =>
    series.map((s) => ({ name: name(s), points: pointsOf(s.points, value) }));
  // iRED drops arrive as events (per port, count); tail drops are in the queue samples.
  const ired = seriesBy(
    events.filter((e) => e.type === 'ired_drop'),
    (e) => `port ${String(e.payload.dev_port)} iRED`,
    (e) => (typeof e.payload.drops === 'number' ? e.payload.drops : null),
  ).map((x) => ({ ...x, kind: 'scatter' as const }));
  // iRED's queue average (bytes) beside the depth of each port that runs iRED.
  const qavg = series
    .filter((s) => s.points.some((p) => p.ired_qavg_bytes != null))
    .map((s) => ({
      name: `${name(s)} iRED avg`,
      points: pointsOf(s.points, (p) => (p.ired_qavg_bytes == null ? null : p.ired_qavg_bytes / 1024)),
    }));
  return {
    depth: depthUnit(series) === 'KiB'
      ? timeSeriesOption({
        series: [...spec((p) => (p.depth_bytes == null ? null : p.depth_bytes / 1024)), ...qavg],
        unit: 'KiB', yName: 'queue depth KiB', yMin: 0, markAreasX, window,
      })
      : timeSeriesOption({ series: spec((p) => p.depth_pkts), unit: 'pkts', yName: 'queue depth (pkts)', yMin: 0, markAreasX, window }),
    delay: timeSeriesOption({
      series: spec((p) => (p.queue_delay_us == null ? null : p.queue_delay_us / 1000)), unit: 'ms', yName: 'queueing delay ms', yMin: 0, markAreasX, window,
    }),
    utilisation: timeSeriesOption({
      series: spec((p) => (p.utilisation == null ? null : p.utilisation * 100)), unit: '%', yName: 'utilisation %', yMin: 0, yMax: 100, window,
    }),
    drops: timeSeriesOption({
      series: [
        ...series.map((s) => ({ name: `${name(s)} tail`, kind: 'bar' as const, points: pointsOf(s.points, (p) => p.drops) })),
        ...ired,
      ],
      unit: 'pkts', yName: 'drops / interval', yMin: 0, window,
    }),
  };
}

/** Event kinds the timeline gives a row of their own, top to bottom. */
/** A hop of the fleet: one switch's egress queue. */
export function hopName(s: { switch: string; dev_port: number; queue: number }): string {
  return `${s.switch} port ${String(s.dev_port)}${s.queue ? ` q${String(s.queue)}` : ''}`;
}

/** A path segment's row on the path chart: the switch and where it sent the
 * media (INT: the sink and the hops the sink reported). */
export function pathLabel(p: PathSegment): string {
  return `${p.switch ?? '?'} · ${p.path}`;
}

/** Whether a segment began with a move: a reroute, or a path change INT saw. */
export function pathMoved(p: PathSegment): boolean {
  return p.source === 'int' ? p.trigger != null : p.reroute_event_id != null;
}

/** Why the media took a segment, for the path table. */
export function pathWhy(p: PathSegment): string {
  if (p.source === 'int') return p.trigger == null ? 'first INT report' : `${p.trigger} (INT)`;
  return p.reroute_event_id == null ? 'primary next hop' : p.trigger ?? 'reroute';
}

/** The call's path over time: one row per (switch, path), a bar over each
 * stretch the media took it; the moves (reroutes, INT path changes) as
 * vertical markers. */
export function pathOption(segments: readonly PathSegment[], window: TimeWindow, now = Date.now()): Record<string, unknown> {
  const rows = Array.from(new Set(segments.map(pathLabel)));
  const clip = (t: number) => Math.min(Math.max(t, window.from), window.to);
  const moves = segments
    .filter(pathMoved)
    .map((p) => ({ t: Date.parse(p.since), label: p.source === 'int' ? 'path change' : 'reroute' }))
    .filter(({ t }) => !Number.isNaN(t) && t >= window.from && t <= window.to);
  return {
    animation: false,
    legend: { show: false },
    // Room for the longest row name (an INT path names every hop), within reason.
    grid: { left: Math.min(360, Math.max(170, 16 + 7 * Math.max(0, ...rows.map((r) => r.length)))), right: 24, top: 16, bottom: 36 },
    tooltip: { trigger: 'item' },
    xAxis: { type: 'time', axisLabel: { hideOverlap: true }, min: window.from, max: window.to },
    yAxis: { type: 'category', data: rows, axisTick: { show: false } },
    series: rows.map((row, i) => ({
      name: row,
      type: 'line',
      lineStyle: { width: 10 },
      symbol: 'circle',
      symbolSize: 6,
      connectNulls: false,
      // Each stretch is a pair of points; null between them breaks the line.
      data: segments
        .filter((p) => pathLabel(p) === row)
        .flatMap((p) => {
          const from = clip(Date.parse(p.since));
          const to = clip(p.until ? Date.parse(p.until) : now);
          return Number.isNaN(from) || Number.isNaN(to) ? [] : [[from, row], [to, row], null];
        }),
      markLine: i === 0 && moves.length
        ? { silent: true, symbol: 'none', lineStyle: { type: 'dashed' }, data: moves.map(({ t, label }) => ({ xAxis: t, label: { formatter: label, position: 'insideEndTop' } })) }
        : undefined,
    })),
  };
}

export const TIMELINE_ROWS: readonly EventType[] = [
  'reroute', 'congestion_onset', 'congestion_clear', 'ired_drop', 'offload_failed', 'fallback',
  'offload_installed', 'offload_removed', 'agent_up', 'agent_down', 'switch_up', 'switch_down',
];

const SEVERITY_COLOUR: Record<string, string> = {
  critical: '#d1242f', error: '#d1242f', warning: '#bf8700', info: '#0969da',
};

export function eventSummary(e: EventItem): string {
  const p = e.payload;
  const str = (k: string) => {
    const v = p[k];
    if (v == null) return undefined;
    return typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean' ? String(v) : JSON.stringify(v);
  };
  switch (e.type) {
    case 'reroute':
      return `flow ${str('flow') ?? '?'}: ${str('from_path') ?? '?'} → ${str('to_path') ?? '?'} (${str('trigger') ?? 'no trigger'})`;
    case 'congestion_onset':
    case 'congestion_clear':
      return `port ${str('dev_port') ?? '?'}${str('queue_delay_us') ? `, delay ${str('queue_delay_us') ?? ''} µs` : ''}${e.message ? ` — ${e.message}` : ''}`;
    case 'ired_drop':
      return `port ${str('dev_port') ?? '?'}: ${str('drops') ?? '?'} packets dropped early`;
    case 'offload_failed':
    case 'fallback':
      return str('reason') ?? e.message ?? '';
    case 'one_way_media':
    case 'one_way_media_cleared': {
      const dir = str('direction');
      const what = dir === 'caller_to_callee' ? 'caller → callee' : dir === 'callee_to_caller' ? 'callee → caller' : (dir ?? '?');
      return e.type === 'one_way_media'
        ? `no media ${what} for ${str('silent_s') ?? '?'} s while the other direction flows`
        : `media ${what} again after ${str('silent_s') ?? '?'} s`;
    }
    default: {
      if (e.message) return e.message;
      const keys = Object.keys(p).slice(0, 3);
      return keys.map((k) => `${k}=${str(k) ?? ''}`).join(', ');
    }
  }
}

export function timelineOption(events: readonly EventItem[]): Record<string, unknown> {
  const kinds = Array.from(new Set([...TIMELINE_ROWS.filter((k) => events.some((e) => e.type === k as string)),
    ...events.map((e) => e.type)]));
  const times = events.map((e) => Date.parse(e.ts)).filter((t) => !Number.isNaN(t));
  const lo = times.length ? Math.min(...times) : 0;
  const hi = times.length ? Math.max(...times) : 0;
  const pad = Math.max(5000, (hi - lo) * 0.04); // keep edge markers off the axes
  return {
    animation: false,
    legend: { show: false },
    grid: { left: 130, right: 24, top: 12, bottom: 56 },
    tooltip: {
      trigger: 'item',
      formatter: (p: { data: { value: [number, string]; summary: string; severity: string } }) =>
        `<b>${p.data.value[1]}</b> (${p.data.severity})<br/>${new Date(p.data.value[0]).toISOString()}<br/>${escapeHtml(p.data.summary)}`,
    },
    xAxis: { type: 'time', axisLabel: { hideOverlap: true }, min: times.length ? lo - pad : undefined, max: times.length ? hi + pad : undefined },
    yAxis: { type: 'category', data: kinds.slice().reverse(), axisTick: { show: false } },
    dataZoom: [{ type: 'inside' }, { type: 'slider', height: 18, bottom: 8 }],
    series: [
      {
        type: 'scatter',
        name: 'events',
        symbolSize: 12,
        data: events.map((e) => ({
          value: [Date.parse(e.ts), e.type],
          id: e.id,
          severity: e.severity,
          summary: eventSummary(e),
          itemStyle: { color: SEVERITY_COLOUR[e.severity] ?? '#6e7781' },
          symbol: e.type === 'reroute' ? 'diamond' : 'circle',
        })),
      },
    ],
  };
}

function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c] ?? c);
}
