// Live session state: a REST snapshot plus WebSocket deltas. Updates arrive per
// session and per quality sample (thousands a second at 5,000 calls); React
// sees at most one new snapshot per flush interval, so the table re-sorts a few
// times a second, not once per message.
import type { LiveSampleItem, LiveSession, LiveSessionItem, SessionSummary } from './types';

export type Listener = () => void;

export function isActive(s: Pick<SessionSummary, 'state' | 'ended_at'>): boolean {
  return s.ended_at == null && (s.state === 'active' || s.state === 'setup');
}

export class LiveSessionStore {
  private readonly byId = new Map<number, LiveSession>();
  private readonly idByKey = new Map<string, number>();
  private readonly listeners = new Set<Listener>();
  private rows: LiveSession[] = [];
  private dirty = false;
  private timer: ReturnType<typeof setTimeout> | null = null;
  /** Set once a snapshot or delta arrived: distinguishes "no calls" from "not loaded yet". */
  loaded = false;

  constructor(private readonly flushMs = 150) {}

  subscribe = (fn: Listener): (() => void) => {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  };

  getRows = (): LiveSession[] => this.rows;

  replaceAll(sessions: readonly SessionSummary[]): void {
    const old = this.byId;
    const next = new Map<number, LiveSession>();
    for (const s of sessions) {
      // Keep quality gathered from samples across a re-fetch.
      if (isActive(s)) next.set(s.id, { ...s, live: old.get(s.id)?.live });
    }
    this.byId.clear();
    this.idByKey.clear();
    for (const [id, s] of next) {
      this.byId.set(id, s);
      this.idByKey.set(s.session_key, id);
    }
    this.loaded = true;
    this.markDirty();
  }

  /** A full summary (REST) or the partial one the live stream sends. */
  upsert(s: SessionSummary | LiveSessionItem): void {
    const prev = this.byId.get(s.id);
    if (isActive(s)) {
      const merged: LiveSession = prev
        ? { ...prev, ...s }
        : {
            from_tag: '', to_tag: null, codec: null, agent: null, caller: null, callee: null,
            packets: null, bytes: null, lost: null,
            mos_avg: null, mos_min: null, jitter_ms_max: null, ...s,
          };
      this.byId.set(s.id, merged);
      this.idByKey.set(s.session_key, s.id);
    } else {
      this.byId.delete(s.id);
      this.idByKey.delete(s.session_key);
    }
    this.loaded = true;
    this.markDirty();
  }

  /** A quality sample of one direction (one interval): advances the running
   * counters the snapshot brought; unknown (ended, not yet seen) sessions are skipped. */
  applySample(q: LiveSampleItem): void {
    const id = q.session_id ?? this.idByKey.get(q.session_key);
    const row = id == null ? undefined : this.byId.get(id);
    if (!row || id == null) return;
    const live = row.live ?? { dirs: {} };
    const prev = live.dirs[q.direction];
    if (prev && prev.ts > q.ts) return; // late sample: the newer one stays current
    this.byId.set(id, {
      ...row,
      packets: (row.packets ?? 0) + q.packets,
      lost: (row.lost ?? 0) + q.lost,
      live: {
        dirs: { ...live.dirs, [q.direction]: { mos: q.mos, jitter_ms: q.jitter_ms, loss_pct: q.loss_pct, ts: q.ts } },
      },
    });
    this.markDirty();
  }

  remove(id: number): void {
    const s = this.byId.get(id);
    if (!s) return;
    this.byId.delete(id);
    this.idByKey.delete(s.session_key);
    this.markDirty();
  }

  get size(): number {
    return this.byId.size;
  }

  /** Applies pending changes now (tests, and teardown). */
  flush(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    if (!this.dirty) return;
    this.dirty = false;
    this.rows = Array.from(this.byId.values());
    this.listeners.forEach((fn) => { fn(); });
  }

  dispose(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.listeners.clear();
  }

  private markDirty(): void {
    this.dirty = true;
    this.timer ??= setTimeout(() => { this.flush(); }, this.flushMs);
  }
}
