import { describe, expect, it } from 'vitest';
import { applyCongestion } from './congestion';
import { makeEvent } from '../test/fixtures';

describe('applyCongestion', () => {
  it('opens on onset and closes on clear per switch port', () => {
    const onset1 = makeEvent(1, 'congestion_onset', { dev_port: 1 }, '2026-01-01T00:00:01Z');
    const onset2 = makeEvent(2, 'congestion_onset', { dev_port: 2 }, '2026-01-01T00:00:02Z');
    const clear1 = makeEvent(3, 'congestion_clear', { dev_port: 1 }, '2026-01-01T00:00:03Z');
    const open = applyCongestion(new Map(), [clear1, onset2, onset1]);
    expect([...open.keys()]).toEqual(['sw1 port 2']);
  });
  it('ignores a clear older than the open onset', () => {
    const onset = makeEvent(1, 'congestion_onset', { dev_port: 1 }, '2026-01-01T00:00:05Z');
    const oldClear = makeEvent(2, 'congestion_clear', { dev_port: 1 }, '2026-01-01T00:00:01Z');
    const open = applyCongestion(applyCongestion(new Map(), [onset]), [oldClear]);
    expect(open.size).toBe(1);
  });
  it('ignores other event types', () => {
    expect(applyCongestion(new Map(), [makeEvent(1, 'reroute', {})]).size).toBe(0);
  });
});
