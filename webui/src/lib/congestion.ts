// Which queues are congested now: a `congestion_onset` event opens an episode
// on a switch port (and queue), a `congestion_clear` of the same closes it.
// The snapshot comes from the server's episodes; the stream's events move it on.
import type { CongestionEpisode, LiveEventItem } from '../api/types';

export type OpenEpisode = Pick<CongestionEpisode, 'switch' | 'dev_port' | 'queue' | 'started_at' | 'queue_delay_us'>;

function int(v: unknown): number | null {
  if (typeof v === 'number' && Number.isInteger(v)) return v;
  if (typeof v === 'string' && /^\d+$/.test(v.trim())) return Number(v);
  return null;
}

export function episodeKey(e: Pick<OpenEpisode, 'switch' | 'dev_port' | 'queue'>): string {
  return `${e.switch ?? '?'} port ${e.dev_port == null ? '?' : String(e.dev_port)}${e.queue ? ` q${String(e.queue)}` : ''}`;
}

export function congestionKey(e: Pick<LiveEventItem, 'switch' | 'payload'>): string {
  return episodeKey({ switch: e.switch ?? null, dev_port: int(e.payload.dev_port), queue: int(e.payload.queue) ?? 0 });
}

/** Open episodes from the server (`GET /congestion?open_only=true`). */
export function fromEpisodes(episodes: readonly CongestionEpisode[]): Map<string, OpenEpisode> {
  const m = new Map<string, OpenEpisode>();
  for (const e of episodes) if (e.ended_at == null) m.set(episodeKey(e), e);
  return m;
}

/** Applies congestion events (any order) to the open episodes; returns a new map. */
export function applyCongestion(
  open: ReadonlyMap<string, OpenEpisode>,
  events: readonly LiveEventItem[],
): Map<string, OpenEpisode> {
  const next = new Map(open);
  const relevant = events
    .filter((e) => e.type === 'congestion_onset' || e.type === 'congestion_clear')
    .sort((a, b) => a.ts.localeCompare(b.ts));
  for (const e of relevant) {
    const key = congestionKey(e);
    const cur = next.get(key);
    if (e.type === 'congestion_onset') {
      if (!cur) {
        const delay = e.payload.queue_delay_us;
        next.set(key, {
          switch: e.switch ?? null, dev_port: int(e.payload.dev_port), queue: int(e.payload.queue) ?? 0,
          started_at: e.ts, queue_delay_us: typeof delay === 'number' ? delay : null,
        });
      }
    } else if (cur && Date.parse(cur.started_at) <= Date.parse(e.ts)) {
      next.delete(key); // a clear older than the open onset belongs to an earlier episode
    }
  }
  return next;
}
