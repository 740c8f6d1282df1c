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

function themeBase(): EChartsCoreOption {
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
  return {
    backgroundColor: 'transparent',
    textStyle: { color: text },
    legend: { textStyle: { color: text } },
    tooltip: { backgroundColor: surface, borderColor: border, textStyle: { color: text } },
    aria: { enabled: true },
    __axis: axis,
  };
}

/** Applies the axis style to every x/y axis the option declares. */
function withTheme(option: EChartsCoreOption): EChartsCoreOption {
  const base = themeBase();
  const axis = base.__axis as Record<string, unknown>;
  delete base.__axis;
  const style = (a: unknown) =>
    Array.isArray(a) ? a.map((x: Record<string, unknown>) => ({ ...axis, ...x })) : { ...axis, ...(a as Record<string, unknown>) };
  const out: EChartsCoreOption = { ...base, ...option };
  if (option.xAxis) out.xAxis = style(option.xAxis);
  if (option.yAxis) out.yAxis = style(option.yAxis);
  out.legend = { ...(base.legend as object), ...(option.legend as object | undefined) };
  out.tooltip = { ...(base.tooltip as object), ...(option.tooltip as object | undefined) };
  return out;
}

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
    const chart = echarts.init(el.current, undefined, { renderer: 'svg' });
    inst.current = chart;
    chart.on('click', (p) => {
      clickRef.current?.(p);
    });
    const ro = new ResizeObserver(() => { chart.resize(); });
    ro.observe(el.current);
    return () => {
      ro.disconnect();
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
