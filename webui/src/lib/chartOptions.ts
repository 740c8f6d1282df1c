// Pure builders of ECharts options (unit-tested without a browser).
import type { EventItem, QualitySample, QueueSample } from '../api/types';

type Point = [number, number | null];

export interface SeriesSpec {
  name: string;
  points: Point[];
  area?: boolean;
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
  stepped?: boolean;
}): Record<string, unknown> {
  return {
    animation: false,
    grid: { left: 56, right: 16, top: 36, bottom: 36 },
    legend: { type: 'scroll', top: 0 },
    tooltip: {
      trigger: 'axis',
      valueFormatter: (v: unknown) => (typeof v === 'number' ? `${+v.toFixed(3)} ${opts.unit}`.trim() : '–'),
    },
    xAxis: { type: 'time' },
    yAxis: { type: 'value', name: opts.yName ?? opts.unit, min: opts.yMin, max: opts.yMax, scale: opts.yMin == null },
    series: opts.series.map((s, i) => ({
      name: s.name,
      type: 'line',
      showSymbol: s.points.length < 40,
      step: opts.stepped ? 'end' : undefined,
      connectNulls: false,
      areaStyle: s.area ? { opacity: 0.15 } : undefined,
      data: s.points,
      markLine:
        i === 0 && opts.markLineY
          ? {
              silent: true, symbol: 'none',
              lineStyle: { type: 'dashed' },
              label: { formatter: opts.markLineY.label },
              data: [{ yAxis: opts.markLineY.value }],
            }
          : undefined,
    })),
  };
}

export function qualityCharts(samples: readonly QualitySample[]) {
  const dir = (s: QualitySample) => s.direction;
  return {
    mos: timeSeriesOption({
      series: seriesBy(samples, dir, (s) => s.mos), unit: '', yName: 'MOS', yMin: 1, yMax: 5,
      markLineY: { value: 3.6, label: 'MOS 3.6' },
    }),
    loss: timeSeriesOption({ series: seriesBy(samples, dir, (s) => (s.loss == null ? null : s.loss * 100)), unit: '%', yName: 'loss %' }),
    jitter: timeSeriesOption({ series: seriesBy(samples, dir, (s) => s.jitter_ms), unit: 'ms', yName: 'jitter ms' }),
    packets: timeSeriesOption({ series: seriesBy(samples, dir, (s) => s.packets), unit: 'pkts', yName: 'packets' }),
  };
}

export function queueCharts(samples: readonly QueueSample[]) {
  const port = (s: QueueSample) => `port ${s.port}`;
  return {
    depth: timeSeriesOption({ series: seriesBy(samples, port, (s) => s.depth), unit: 'cells', yName: 'queue depth' }),
    delay: timeSeriesOption({
      series: seriesBy(samples, port, (s) => (s.delay_us == null ? null : s.delay_us / 1000)), unit: 'ms', yName: 'queueing delay ms',
    }),
    utilisation: timeSeriesOption({
      series: seriesBy(samples, port, (s) => (s.utilisation == null ? null : s.utilisation * 100)), unit: '%', yName: 'utilisation %', yMin: 0, yMax: 100,
    }),
    drops: timeSeriesOption({
      series: [
        ...seriesBy(samples, (s) => `${port(s)} tail`, (s) => s.drops_tail),
        ...seriesBy(samples, (s) => `${port(s)} iRED`, (s) => s.drops_ired),
      ],
      unit: 'pkts', yName: 'drops', stepped: true,
    }),
  };
}

/** Event kinds the timeline gives a row of their own, top to bottom. */
export const TIMELINE_ROWS = [
  'reroute', 'congestion_onset', 'congestion_clear', 'ired_drop', 'offload_failed', 'fallback',
  'offload_installed', 'offload_removed', 'agent_up', 'agent_down', 'switch_up', 'switch_down',
] as const;

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
  switch (e.kind) {
    case 'reroute':
      return `flow ${str('flow') ?? '?'}: ${str('from_path') ?? '?'} → ${str('to_path') ?? '?'} (${str('trigger') ?? 'no trigger'})`;
    case 'congestion_onset':
    case 'congestion_clear':
      return `port ${str('port') ?? '?'}${str('queue_delay_us') ? `, delay ${str('queue_delay_us') ?? ''} µs` : ''}`;
    case 'offload_failed':
    case 'fallback':
      return str('reason') ?? str('error') ?? '';
    default: {
      const keys = Object.keys(p).slice(0, 3);
      return keys.map((k) => `${k}=${str(k) ?? ''}`).join(', ');
    }
  }
}

export function timelineOption(events: readonly EventItem[]): Record<string, unknown> {
  const kinds = Array.from(new Set([...TIMELINE_ROWS.filter((k) => events.some((e) => e.kind === k)),
    ...events.map((e) => e.kind)]));
  return {
    animation: false,
    grid: { left: 130, right: 24, top: 12, bottom: 56 },
    tooltip: {
      trigger: 'item',
      formatter: (p: { data: { value: [number, string]; summary: string; severity: string } }) =>
        `<b>${p.data.value[1]}</b> (${p.data.severity})<br/>${new Date(p.data.value[0]).toISOString()}<br/>${escapeHtml(p.data.summary)}`,
    },
    xAxis: { type: 'time' },
    yAxis: { type: 'category', data: kinds.slice().reverse(), axisTick: { show: false } },
    dataZoom: [{ type: 'inside' }, { type: 'slider', height: 18, bottom: 8 }],
    series: [
      {
        type: 'scatter',
        name: 'events',
        symbolSize: 12,
        data: events.map((e) => ({
          value: [Date.parse(e.ts), e.kind],
          id: e.id,
          severity: e.severity,
          summary: eventSummary(e),
          itemStyle: { color: SEVERITY_COLOUR[e.severity] ?? '#6e7781' },
          symbol: e.kind === 'reroute' ? 'diamond' : 'circle',
        })),
      },
    ],
  };
}

function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c] ?? c);
}
