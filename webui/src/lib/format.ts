// Display helpers shared by tables, charts and the header summary.

/** MOS bands used across the console (ITU-T G.107 user-satisfaction ranges). */
export type MosBand = 'good' | 'fair' | 'poor' | 'bad' | 'unknown';

/** Below this MOS a call counts as degraded in the header summary. */
export const MOS_DEGRADED = 3.6;

export function mosBand(mos: number | null | undefined): MosBand {
  if (mos == null || Number.isNaN(mos)) return 'unknown';
  if (mos >= 4.0) return 'good';
  if (mos >= MOS_DEGRADED) return 'fair';
  if (mos >= 3.1) return 'poor';
  return 'bad';
}

export function formatMos(mos: number | null | undefined): string {
  return mos == null || Number.isNaN(mos) ? '–' : mos.toFixed(2);
}

export function formatDuration(seconds: number | null | undefined): string {
  if (seconds == null || !Number.isFinite(seconds) || seconds < 0) return '–';
  const s = Math.floor(seconds);
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const sec = s % 60;
  const mm = String(m).padStart(h > 0 ? 2 : 1, '0');
  const ss = String(sec).padStart(2, '0');
  return h > 0 ? `${h}:${mm}:${ss}` : `${mm}:${ss}`;
}

/** Seconds between two ISO timestamps (end defaults to now). */
export function elapsedSeconds(startIso: string | null | undefined, endIso?: string | null, now = Date.now()): number | null {
  if (!startIso) return null;
  const start = Date.parse(startIso);
  if (Number.isNaN(start)) return null;
  const end = endIso ? Date.parse(endIso) : now;
  return Math.max(0, (end - start) / 1000);
}

export function formatPercent(fraction: number | null | undefined, digits = 1): string {
  if (fraction == null || !Number.isFinite(fraction)) return '–';
  return `${(fraction * 100).toFixed(digits)} %`;
}

export function formatMs(ms: number | null | undefined, digits = 1): string {
  if (ms == null || !Number.isFinite(ms)) return '–';
  return `${ms.toFixed(digits)} ms`;
}

const compact = new Intl.NumberFormat('en', { notation: 'compact', maximumFractionDigits: 1 });
export function formatCount(n: number | null | undefined): string {
  if (n == null || !Number.isFinite(n)) return '–';
  return n < 10_000 ? String(n) : compact.format(n);
}

const timeFmt = new Intl.DateTimeFormat('en-GB', {
  year: 'numeric', month: '2-digit', day: '2-digit',
  hour: '2-digit', minute: '2-digit', second: '2-digit', hour12: false, timeZone: 'UTC',
});
/** Operators compare with logs, so the console shows UTC everywhere. */
export function formatTime(iso: string | null | undefined): string {
  if (!iso) return '–';
  const t = Date.parse(iso);
  return Number.isNaN(t) ? '–' : `${timeFmt.format(t)} UTC`;
}

export function formatEndpoint(addr: string | null | undefined, port: number | null | undefined): string {
  if (!addr) return '–';
  const host = addr.includes(':') ? `[${addr}]` : addr;
  return port == null ? host : `${host}:${port}`;
}

const clockFmt = new Intl.DateTimeFormat('en-GB', {
  hour: '2-digit', minute: '2-digit', second: '2-digit', hour12: false, timeZone: 'UTC',
});
/** Time of day in UTC (`14:03:07`), for tables whose rows share a day. */
export function formatClock(iso: string | null | undefined): string {
  if (!iso) return '–';
  const t = Date.parse(iso);
  return Number.isNaN(t) ? '–' : clockFmt.format(t);
}
