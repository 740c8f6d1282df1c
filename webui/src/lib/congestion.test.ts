import { describe, expect, it } from 'vitest';
import { applyCongestion, fromEpisodes } from './congestion';
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
  it('keys episodes per queue and starts from the server\'s open episodes', () => {
    const open = fromEpisodes([
      { switch: 'sw1', dev_port: 3, queue: 0, started_at: '2026-01-01T00:00:00Z', ended_at: null, onset_event_id: 1, queue_delay_us: null },
      { switch: 'sw1', dev_port: 4, queue: 0, started_at: '2026-01-01T00:00:00Z', ended_at: '2026-01-01T00:00:09Z', onset_event_id: 2, queue_delay_us: null },
    ]);
    expect([...open.keys()]).toEqual(['sw1 port 3']);
    const more = applyCongestion(open, [
      makeEvent(5, 'congestion_onset', { dev_port: '3', queue: 1 }, '2026-01-01T00:00:05Z'),
      makeEvent(6, 'congestion_clear', { dev_port: 3 }, '2026-01-01T00:00:06Z'),
    ]);
    expect([...more.keys()]).toEqual(['sw1 port 3 q1']);
  });
  it('ignores other event types', () => {
    expect(applyCongestion(new Map(), [makeEvent(1, 'reroute', {})]).size).toBe(0);
  });
});
