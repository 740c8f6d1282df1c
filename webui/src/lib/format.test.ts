import { describe, expect, it } from 'vitest';
import { elapsedSeconds, formatDuration, formatEndpoint, formatMos, formatPercent, mosBand } from './format';

describe('mosBand', () => {
  it.each([
    [4.4, 'good'], [4.0, 'good'], [3.99, 'fair'], [3.6, 'fair'], [3.59, 'poor'], [3.1, 'poor'], [2.0, 'bad'],
  ] as const)('%s → %s', (mos, band) => {
    expect(mosBand(mos)).toBe(band);
  });
  it('treats missing MOS as unknown', () => {
    expect(mosBand(null)).toBe('unknown');
    expect(mosBand(undefined)).toBe('unknown');
    expect(mosBand(Number.NaN)).toBe('unknown');
  });
});

describe('formatting', () => {
  it('formats durations', () => {
    expect(formatDuration(0)).toBe('0:00');
    expect(formatDuration(65.7)).toBe('1:05');
    expect(formatDuration(3725)).toBe('1:02:05');
    expect(formatDuration(null)).toBe('–');
    expect(formatDuration(-1)).toBe('–');
  });
  it('computes elapsed seconds', () => {
    expect(elapsedSeconds('2026-01-01T00:00:00Z', '2026-01-01T00:01:30Z')).toBe(90);
    expect(elapsedSeconds('2026-01-01T00:00:00Z', null, Date.parse('2026-01-01T00:00:10Z'))).toBe(10);
    expect(elapsedSeconds(null)).toBeNull();
    expect(elapsedSeconds('garbage')).toBeNull();
  });
  it('formats MOS, percent and endpoints', () => {
    expect(formatMos(4.4123)).toBe('4.41');
    expect(formatMos(null)).toBe('–');
    expect(formatPercent(0.0123)).toBe('1.2 %');
    expect(formatEndpoint('198.18.1.10', 20000)).toBe('198.18.1.10:20000');
    expect(formatEndpoint('2001:db8::1', 5004)).toBe('[2001:db8::1]:5004');
    expect(formatEndpoint(null, 1)).toBe('–');
  });
});
