import { afterEach, describe, expect, it, vi } from 'vitest';
import { LiveSessionStore } from './liveStore';
import { makeSession } from '../test/fixtures';

afterEach(() => {
  vi.useRealTimers();
});

describe('LiveSessionStore', () => {
  it('coalesces many deltas into one notification per flush interval', () => {
    vi.useFakeTimers();
    const store = new LiveSessionStore(100);
    const listener = vi.fn();
    store.subscribe(listener);
    for (let i = 0; i < 5000; i++) store.upsert(makeSession(i));
    expect(listener).not.toHaveBeenCalled();
    vi.advanceTimersByTime(100);
    expect(listener).toHaveBeenCalledTimes(1);
    expect(store.getRows()).toHaveLength(5000);
  });

  it('merges updates and drops ended sessions', () => {
    const store = new LiveSessionStore();
    store.replaceAll([makeSession(1), makeSession(2)]);
    store.upsert({ ...makeSession(1), mos: 2.5 });
    store.upsert({ ...makeSession(2), state: 'ended', ended_at: '2026-01-01T00:05:00Z' });
    store.flush();
    expect(store.getRows().map((s) => [s.id, s.mos])).toEqual([['s1', 2.5]]);
    store.dispose();
  });

  it('keeps the same rows array when nothing changed', () => {
    const store = new LiveSessionStore();
    store.replaceAll([makeSession(1)]);
    store.flush();
    const before = store.getRows();
    store.flush();
    expect(store.getRows()).toBe(before);
  });
});
