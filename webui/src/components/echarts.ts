// ECharts, tree-shaken to what the console draws. Imported only from lazy
// chunks so it stays out of the initial bundle.
import * as echarts from 'echarts/core';
import { LineChart, ScatterChart, BarChart } from 'echarts/charts';
import {
  AriaComponent,
  DataZoomComponent,
  GridComponent,
  LegendComponent,
  MarkAreaComponent,
  MarkLineComponent,
  TitleComponent,
  TooltipComponent,
} from 'echarts/components';
import { SVGRenderer } from 'echarts/renderers';

// SVG: crisp on wall screens, cheap at our point counts, and renders in jsdom.
echarts.use([
  LineChart, ScatterChart, BarChart,
  AriaComponent, DataZoomComponent, GridComponent, LegendComponent, MarkAreaComponent,
  MarkLineComponent, TitleComponent, TooltipComponent, SVGRenderer,
]);

export { echarts };
export type { EChartsCoreOption } from 'echarts/core';
