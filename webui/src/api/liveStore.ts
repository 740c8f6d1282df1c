// Live session state: a REST snapshot plus WebSocket deltas. Updates arrive per
// session (thousands a second at 5,000 calls); React sees at most one new
// snapshot per flush interval so the table re-sorts a few times a second, not
// once per message.
import type { SessionSummary } from './types';

export type Listener = () => void;

export function isActive(s: SessionSummary): boolean {
  return s.ended_at == null && s.state !== 'ended' && s.state !== 'deleted';
}

export class LiveSessionStore {
  private readonly byId = new Map<string, SessionSummary>();
  private readonly listeners = new Set<Listener>();
  private rows: SessionSummary[] = [];
  private dirty = false;
  private timer: ReturnType<typeof setTimeout> | null = null;
  /** Set once a snapshot or delta arrived: distinguishes "no calls" from "not loaded yet". */
  loaded = false;
  /** Wall time of the last applied change, for the "updated Ns ago" hint. */
  lastUpdate = 0;

  constructor(private readonly flushMs = 150) {}

  subscribe = (fn: Listener): (() => void) => {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  };

  getRows = (): SessionSummary[] => this.rows;

  replaceAll(sessions: readonly SessionSummary[]): void {
    this.byId.clear();
    for (const s of sessions) if (isActive(s)) this.byId.set(s.id, s);
    this.loaded = true;
    this.markDirty();
  }

  upsert(s: SessionSummary): void {
    if (isActive(s)) this.byId.set(s.id, { ...this.byId.get(s.id), ...s });
    else this.byId.delete(s.id);
    this.loaded = true;
    this.markDirty();
  }

  remove(id: string): void {
    if (this.byId.delete(id)) this.markDirty();
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
    this.lastUpdate = Date.now();
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
