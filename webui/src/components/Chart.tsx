// React wrapper around one ECharts instance: options in, chart out, resized
// with its box, themed from the CSS tokens, described for screen readers.
import { useEffect, useRef } from 'react';
import { echarts, type EChartsCoreOption } from './echarts';
import { useTheme } from './theme';

export interface ChartProps {
  option: EChartsCoreOption;
  /** Accessible name; ECharts' aria module adds a generated description. */
  label: string;
  className?: string;
  onPointClick?: (params: { seriesName?: string; dataIndex: number; data: unknown }) => void;
}

function cssVar(name: string): string {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
}

/** Colours from the active theme's CSS tokens, applied to every axis, legend and tooltip. */
function withTheme(option: EChartsCoreOption): EChartsCoreOption {
  const text = cssVar('--text') || '#1f2328';
  const muted = cssVar('--text-muted') || '#57606a';
  const border = cssVar('--border') || '#d0d7de';
  const surface = cssVar('--surface') || '#ffffff';
  const axis = {
    axisLine: { lineStyle: { color: border } },
    axisLabel: { color: muted },
    splitLine: { lineStyle: { color: border, opacity: 0.6 } },
    nameTextStyle: { color: muted },
  };
  const style = (a: unknown) =>
    Array.isArray(a)
      ? a.map((x: Record<string, unknown>) => ({ ...axis, ...x }))
      : { ...axis, ...(a as Record<string, unknown>) };
  return {
    backgroundColor: 'transparent',
    textStyle: { color: text },
    aria: { enabled: true },
    ...option,
    ...(option.xAxis ? { xAxis: style(option.xAxis) } : {}),
    ...(option.yAxis ? { yAxis: style(option.yAxis) } : {}),
    legend: { textStyle: { color: text }, ...(option.legend as object | undefined) },
    tooltip: { backgroundColor: surface, borderColor: border, textStyle: { color: text }, ...(option.tooltip as object | undefined) },
  };
}

/** The container keeps its ECharts instance so a test (or an operator's devtools)
 * can read what was drawn: `el.p4relayChart.getOption()`, axis extents, pixels. */
export type ChartElement = HTMLDivElement & { p4relayChart?: echarts.ECharts };

export default function Chart({ option, label, className = 'chart', onPointClick }: ChartProps) {
  const el = useRef<HTMLDivElement>(null);
  const inst = useRef<echarts.ECharts | null>(null);
  const { theme } = useTheme();
  const clickRef = useRef(onPointClick);
  useEffect(() => {
    clickRef.current = onPointClick;
  }, [onPointClick]);

  useEffect(() => {
    if (!el.current) return;
    const host: ChartElement = el.current;
    const chart = echarts.init(host, undefined, { renderer: 'svg' });
    inst.current = chart;
    host.p4relayChart = chart;
    chart.on('click', (p) => {
      clickRef.current?.(p);
    });
    const ro = new ResizeObserver(() => { chart.resize(); });
    ro.observe(el.current);
    return () => {
      ro.disconnect();
      delete host.p4relayChart;
      chart.dispose();
      inst.current = null;
    };
  }, []);

  useEffect(() => {
    // notMerge keeps removed series from lingering; lazyUpdate batches live updates.
    inst.current?.setOption(withTheme(option), { notMerge: true, lazyUpdate: true });
  }, [option, theme]);

  // ECharts' aria module writes its generated description onto its own
  // container, so the accessible name lives on the wrapper.
  return (
    <div role="figure" aria-label={label} data-testid="chart">
      <div ref={el} className={className} />
    </div>
  );
}
