import { afterEach, describe, expect, it, vi } from 'vitest';
import { LiveSessionStore } from './liveStore';
import { makeSession } from '../test/fixtures';
import { currentMos, lossFraction, packetCount } from '../lib/liveMetrics';

afterEach(() => {
  vi.useRealTimers();
});

const sample = (id: number, direction: 'caller_to_callee' | 'callee_to_caller', ts: string, mos: number, lost = 0) => ({
  session_id: id, session_key: `call-${id}@198.18.1.10;ft${id}`, direction, ts,
  packets: 50, lost, loss_pct: 0, jitter_ms: 2, delay_ms: null, mos,
});

describe('LiveSessionStore', () => {
  it('coalesces many deltas into one notification per flush interval', () => {
    vi.useFakeTimers();
    const store = new LiveSessionStore(100);
    const listener = vi.fn();
    store.subscribe(listener);
    for (let i = 1; i <= 5000; i++) store.upsert(makeSession(i));
    expect(listener).not.toHaveBeenCalled();
    vi.advanceTimersByTime(100);
    expect(listener).toHaveBeenCalledTimes(1);
    expect(store.getRows()).toHaveLength(5000);
  });

  it('merges partial live updates and drops ended sessions', () => {
    const store = new LiveSessionStore();
    store.replaceAll([makeSession(1), makeSession(2)]);
    const { id, session_key, call_id, offloaded, offload_reason, switch: sw, started_at, answered_at } = makeSession(1);
    store.upsert({ id, session_key, call_id, state: 'active', offloaded: !offloaded, offload_reason, switch: sw, started_at, answered_at, ended_at: null });
    store.upsert({ ...makeSession(2), state: 'ended', ended_at: '2026-01-01T00:05:00Z' });
    store.flush();
    const rows = store.getRows();
    expect(rows.map((s) => s.id)).toEqual([1]);
    expect(rows[0]?.offloaded).toBe(!offloaded);
    expect(rows[0]?.from_tag).toBe('ft1'); // kept from the snapshot
  });

  it('tracks the latest sample per direction and the worse direction’s MOS', () => {
    const store = new LiveSessionStore();
    store.replaceAll([makeSession(1, { packets: null, lost: null })]);
    store.applySample(sample(1, 'caller_to_callee', '2026-01-01T00:00:02Z', 4.2));
    store.applySample(sample(1, 'callee_to_caller', '2026-01-01T00:00:02Z', 3.1, 50));
    store.applySample(sample(1, 'callee_to_caller', '2026-01-01T00:00:01Z', 4.4)); // late, ignored
    store.flush();
    const row = store.getRows()[0];
    expect(row && currentMos(row)).toBe(3.1);
    expect(row && lossFraction(row)).toBeCloseTo(50 / 150);
  });

  it('advances the running counters of a call that was running before the snapshot', () => {
    const store = new LiveSessionStore();
    store.replaceAll([makeSession(3, { packets: 9000, lost: 1000 })]);
    store.flush();
    const before = store.getRows()[0];
    expect(before && packetCount(before)).toBe(9000);
    expect(before && lossFraction(before)).toBeCloseTo(0.1);
    store.applySample(sample(3, 'caller_to_callee', '2026-01-01T00:00:02Z', 4.2));
    store.applySample(sample(3, 'callee_to_caller', '2026-01-01T00:00:02Z', 3.0, 50));
    store.flush();
    const row = store.getRows()[0];
    expect(row && packetCount(row)).toBe(9100);
    expect(row && lossFraction(row)).toBeCloseTo(1050 / 10150);
  });

  it('keeps the parties from the snapshot and takes them from live updates', () => {
    const store = new LiveSessionStore();
    store.replaceAll([makeSession(1)]);
    const { id, session_key, call_id, offloaded, offload_reason, switch: sw, started_at, answered_at } = makeSession(2);
    store.upsert({
      id, session_key, call_id, state: 'active', offloaded, offload_reason, switch: sw, started_at, answered_at,
      ended_at: null, caller: '198.18.1.20:6010', callee: '198.18.2.20:7010',
    });
    store.flush();
    const rows = new Map(store.getRows().map((s) => [s.id, s]));
    expect(rows.get(1)?.caller).toBe('198.18.1.10:6002');
    expect(rows.get(2)?.callee).toBe('198.18.2.20:7010');
  });

  it('ignores samples of sessions it does not hold', () => {
    const store = new LiveSessionStore();
    store.applySample(sample(9, 'caller_to_callee', '2026-01-01T00:00:02Z', 4.2));
    store.flush();
    expect(store.getRows()).toEqual([]);
  });
});
