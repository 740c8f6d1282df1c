// Reads what each ECharts instance on the page actually drew: its series (from
// the option ECharts holds), the x axis extent it settled on, and where every
// data point landed in pixels relative to the plot area. A chart that exists
// but shows nothing (all-null series, data outside the axis, a two-day axis
// around four seconds of samples) fails these checks; a canvas count would not.
import type { Page } from 'playwright-core';
import { expect } from 'vitest';

export interface SeriesDrawn {
  name: string;
  type: string;
  /** Data items, and those with a numeric value. */
  points: number;
  values: number;
  /** Numeric points whose pixel position falls inside the plot area. */
  inside: number;
  /** x values (time series: ms) of the numeric points. */
  xMin: number | null;
  xMax: number | null;
  yMin: number | null;
  yMax: number | null;
  sum: number;
  markAreas: string[];
  markLinesX: number;
}

export interface ChartDrawn {
  title: string;
  xType: string | null;
  /** The x axis extent ECharts used (ms for time axes). */
  xExtent: [number, number] | null;
  series: SeriesDrawn[];
  /** <path> elements in the SVG: lines, bars, symbols, axes. */
  paths: number;
  width: number;
  height: number;
}

export async function readCharts(page: Page): Promise<ChartDrawn[]> {
  return page.evaluate(() => {
    interface Inst {
      getOption: () => { series?: Record<string, unknown>[]; xAxis?: { type?: string }[] };
      getModel: () => { getComponent: (t: string, i: number) => { axis?: { scale: { getExtent: () => [number, number] } }; coordinateSystem?: { getRect: () => { x: number; y: number; width: number; height: number } } } | undefined };
      convertToPixel: (finder: { seriesIndex: number }, value: unknown) => [number, number] | number | undefined;
    }
    const out: ChartDrawn[] = [];
    for (const fig of Array.from(document.querySelectorAll<HTMLElement>('[data-testid="chart"]'))) {
      const host = fig.firstElementChild as (HTMLElement & { p4relayChart?: Inst }) | null;
      const c = host?.p4relayChart;
      const title = fig.getAttribute('aria-label') ?? '';
      if (!host || !c) continue;
      const opt = c.getOption();
      const model = c.getModel();
      const xAxis = model.getComponent('xAxis', 0);
      const xType = opt.xAxis?.[0]?.type ?? null;
      const yCategory = (opt as { yAxis?: { type?: string }[] }).yAxis?.[0]?.type === 'category';
      const rect = model.getComponent('grid', 0)?.coordinateSystem?.getRect();
      const series = (opt.series ?? []).map((s, si) => {
        const data = (s.data as unknown[] | undefined) ?? [];
        let values = 0, inside = 0, sum = 0;
        let xMin: number | null = null, xMax: number | null = null, yMin: number | null = null, yMax: number | null = null;
        data.forEach((d, i) => {
          const raw: unknown = d != null && typeof d === 'object' && !Array.isArray(d) && 'value' in d ? d.value : d;
          let xy: [unknown, unknown];
          let v: unknown;
          if (Array.isArray(raw)) {
            // [time, value], or [time, category] on a timeline (counts as 1).
            xy = [raw[0], raw[1]];
            v = typeof raw[1] === 'string' ? 1 : raw[1];
            if (typeof raw[0] !== 'number') return;
          } else if (yCategory) {
            xy = [raw, i];
            v = raw;
          } else {
            xy = [i, raw];
            v = raw;
          }
          const x = xy[0];
          if (typeof v !== 'number' || !Number.isFinite(v)) return;
          values += 1;
          sum += v;
          if (typeof x === 'number' && Array.isArray(raw)) {
            xMin = xMin == null ? x : Math.min(xMin, x);
            xMax = xMax == null ? x : Math.max(xMax, x);
          }
          yMin = yMin == null ? v : Math.min(yMin, v);
          yMax = yMax == null ? v : Math.max(yMax, v);
          const px = c.convertToPixel({ seriesIndex: si }, xy);
          if (rect && Array.isArray(px) && px[0] >= rect.x - 1 && px[0] <= rect.x + rect.width + 1 && px[1] >= rect.y - 1 && px[1] <= rect.y + rect.height + 1) inside += 1;
        });
        const markArea = s.markArea as { data?: [{ name?: string }, unknown][] } | undefined;
        const markLine = s.markLine as { data?: { xAxis?: number }[] } | undefined;
        return {
          name: typeof s.name === 'string' ? s.name : '', type: typeof s.type === 'string' ? s.type : '', points: data.length, values, inside,
          xMin, xMax, yMin, yMax, sum,
          markAreas: (markArea?.data ?? []).map((a) => a[0].name ?? ''),
          markLinesX: (markLine?.data ?? []).filter((m) => typeof m.xAxis === 'number').length,
        };
      });
      const box = host.getBoundingClientRect();
      out.push({
        title, xType,
        xExtent: xType === 'time' ? xAxis?.axis?.scale.getExtent() ?? null : null,
        series, paths: host.querySelectorAll('svg path').length, width: box.width, height: box.height,
      });
    }
    return out;
  });
}

export interface SeriesExpect {
  name: string | RegExp;
  /** At least this many numeric points, every one of them inside the plot area. */
  minValues: number;
}

export interface ChartExpect {
  title: string;
  series: SeriesExpect[];
  /** Time charts: the x extent must lie within [from, to] and be at most `maxSpanMs` wide. */
  window?: { from: number; to: number; maxSpanMs: number };
  /** Shaded spans the chart must carry (a label, alone or among those of overlapping spans). */
  areas?: (string | RegExp)[];
}

const matches = (v: string, p: string | RegExp) => (typeof p === 'string' ? v === p : p.test(v));

/** Every expectation as a list of problems (empty: the chart shows the truth). */
export function checkChart(drawn: ChartDrawn | undefined, want: ChartExpect): string[] {
  const bad: string[] = [];
  const t = want.title;
  if (!drawn) return [`${t}: no chart drawn`];
  if (drawn.width < 200 || drawn.height < 120) bad.push(`${t}: chart box ${String(drawn.width)}×${String(drawn.height)} px`);
  const svgFloor = want.series.length + 2;
  if (drawn.paths < svgFloor) bad.push(`${t}: ${String(drawn.paths)} SVG paths`);
  for (const s of want.series) {
    const got = drawn.series.find((x) => matches(x.name, s.name));
    if (!got) {
      bad.push(`${t}: no series ${String(s.name)} (has ${drawn.series.map((x) => x.name).join(', ')})`);
      continue;
    }
    if (got.values < s.minValues) bad.push(`${t}/${got.name}: ${String(got.values)} points with a value, want ≥ ${String(s.minValues)}`);
    if (got.inside < got.values) bad.push(`${t}/${got.name}: ${String(got.values - got.inside)} of ${String(got.values)} points outside the plot area`);
  }
  if (want.window) {
    const ext = drawn.xExtent;
    if (!ext) bad.push(`${t}: no time axis`);
    else {
      const [lo, hi] = ext;
      const { from, to, maxSpanMs } = want.window;
      if (lo < from || hi > to) bad.push(`${t}: x axis ${new Date(lo).toISOString()} – ${new Date(hi).toISOString()} outside ${new Date(from).toISOString()} – ${new Date(to).toISOString()}`);
      if (hi - lo > maxSpanMs) bad.push(`${t}: x axis spans ${String(Math.round((hi - lo) / 1000))} s, want ≤ ${String(maxSpanMs / 1000)} s`);
    }
  }
  for (const a of want.areas ?? []) {
    if (!drawn.series.some((s) => s.markAreas.some((m) => m.split(' · ').some((part) => matches(part, a))))) bad.push(`${t}: no shaded span ${String(a)}`);
  }
  return bad;
}

/** Reads the page's charts until every expectation holds (live data still
 * arriving) or `withinMs` passes, then fails with the problems left. */
export async function chartsTrue(page: Page, want: ChartExpect[], withinMs = 20_000): Promise<ChartDrawn[]> {
  let problems: string[] = [];
  let drawn: ChartDrawn[] = [];
  const t0 = Date.now();
  while (Date.now() - t0 < withinMs) {
    drawn = await readCharts(page);
    problems = want.flatMap((w) => checkChart(drawn.find((d) => d.title === w.title), w));
    if (problems.length === 0) return drawn;
    await page.waitForTimeout(250);
  }
  expect(problems).toEqual([]);
  return drawn;
}
