// Which ports are congested now: an onset event opens an episode on a
// switch port, a clear event closes it.
import type { LiveEventItem } from '../api/types';

export function congestionKey(e: Pick<LiveEventItem, 'switch' | 'payload'>): string {
  const port = e.payload.dev_port;
  return `${e.switch ?? '?'} port ${typeof port === 'number' || typeof port === 'string' ? String(port) : '?'}`;
}

/** Applies congestion events (any order) to the open episodes; returns a new map. */
export function applyCongestion(
  open: ReadonlyMap<string, LiveEventItem>,
  events: readonly LiveEventItem[],
): Map<string, LiveEventItem> {
  const next = new Map(open);
  const relevant = events
    .filter((e) => e.type === 'congestion_onset' || e.type === 'congestion_clear')
    .sort((a, b) => a.ts.localeCompare(b.ts));
  for (const e of relevant) {
    const key = congestionKey(e);
    const cur = next.get(key);
    if (cur && cur.ts > e.ts) continue; // older than what we know
    if (e.type === 'congestion_onset') next.set(key, e);
    else next.delete(key);
  }
  return next;
}
