import { lazy, Suspense } from 'react';
import type { EChartsCoreOption } from './echarts';

// ECharts loads with the first chart, not with the app.
const Chart = lazy(() => import('./Chart'));

export function ChartCard({ title, option, empty }: { title: string; option: EChartsCoreOption; empty?: boolean }) {
  return (
    <section className="card chart-card" aria-label={title}>
      <h2>{title}</h2>
      {empty ? (
        <p className="muted">No samples yet.</p>
      ) : (
        <Suspense fallback={<div className="chart muted">Loading chart…</div>}>
          <Chart option={option} label={title} />
        </Suspense>
      )}
    </section>
  );
}
