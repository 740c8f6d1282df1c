// What the switches did about congestion, from their events: the reroutes
// (newest first) and iRED's early drops and spared media per switch port.
import type { EventItem } from '../api/types';

export interface RerouteRow {
  id: number;
  ts: string;
  switch: string;
  flow: string;
  direction: string;
  from: string;
  to: string;
  trigger: string;
  /** Where on the path the congestion behind a move was seen ('–' for a move back). */
  seenAt: string;
}

export interface IredPort {
  key: string;
  switch: string;
  devPort: number;
  drops: number;
  spared: number;
  last: string;
}

const text = (v: unknown): string => (typeof v === 'string' || typeof v === 'number' ? String(v) : '–');
const count = (v: unknown): number => (typeof v === 'number' && Number.isFinite(v) && v > 0 ? v : 0);

/** Where on the path the congestion behind a reroute was seen: the hop an
 * INT-driven move names (`s3 port 2 (INT)`), else the moving switch's own
 * primary port (local detection); '–' for a move back. */
export function congestionSeenAt(e: EventItem): string {
  const p = e.payload;
  if (p.direction !== 'to_backup' && p.direction !== 'notify_upstream') return '–';
  if (typeof p.hop_switch === 'string' && typeof p.hop_port === 'number') {
    return `${p.hop_switch} port ${String(p.hop_port)} (INT)`;
  }
  return typeof p.from_path === 'string' ? `${e.switch ?? '?'} ${p.from_path}` : '–';
}

export function latestReroutes(events: readonly EventItem[], n: number): RerouteRow[] {
  return events
    .filter((e) => e.type === 'reroute')
    .sort((a, b) => b.ts.localeCompare(a.ts) || b.id - a.id)
    .slice(0, n)
    .map((e) => ({
      id: e.id, ts: e.ts, switch: e.switch ?? '?',
      flow: text(e.payload.flow), direction: text(e.payload.direction),
      from: text(e.payload.from_path), to: text(e.payload.to_path), trigger: text(e.payload.trigger),
      seenAt: congestionSeenAt(e),
    }));
}

/** iRED per switch port: the drops and spared packets its events add up to (busiest first). */
export function iredByPort(events: readonly EventItem[]): IredPort[] {
  const m = new Map<string, IredPort>();
  for (const e of events) {
    const port = e.payload.dev_port;
    if (e.type !== 'ired_drop' || typeof port !== 'number') continue;
    const sw = e.switch ?? '?';
    const key = `${sw} port ${String(port)}`;
    const cur = m.get(key) ?? { key, switch: sw, devPort: port, drops: 0, spared: 0, last: e.ts };
    cur.drops += count(e.payload.drops);
    cur.spared += count(e.payload.spared);
    if (e.ts > cur.last) cur.last = e.ts;
    m.set(key, cur);
  }
  return [...m.values()].sort((a, b) => b.drops - a.drops || a.key.localeCompare(b.key));
}
