import { render, screen, waitFor } from '@testing-library/react';
import { describe, expect, it } from 'vitest';
import Chart from './Chart';
import { ThemeProvider } from './theme';
import { timeSeriesOption } from '../lib/chartOptions';

describe('Chart', () => {
  it('draws an SVG chart with an accessible name', async () => {
    const option = timeSeriesOption({
      series: [{ name: 'port 1', points: [[Date.parse('2026-01-01T00:00:00Z'), 3], [Date.parse('2026-01-01T00:00:01Z'), 5]] }],
      unit: 'ms',
    });
    render(<ThemeProvider><Chart option={option} label="Queueing delay" /></ThemeProvider>);
    const el = screen.getByRole('figure', { name: 'Queueing delay' });
    // lazyUpdate renders on a later frame.
    await waitFor(() => {
      expect(el.querySelector('svg path')).not.toBeNull();
    });
    expect(el.querySelector('svg')).not.toBeNull();
  });
});
