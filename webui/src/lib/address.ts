// IPv4/IPv6 addresses and media endpoints (`addr:port`, `[v6]:port`, as the
// server writes them): parsed for sorting, prefix filtering and fitting a column.
// Hand-written: a few lines of parsing do not justify an address library in the bundle.

export interface Ip {
  version: 4 | 6;
  value: bigint;
}

export interface Prefix extends Ip {
  length: number;
}

export interface Endpoint {
  ip: Ip;
  port: number;
}

const BITS = { 4: 32, 6: 128 } as const;

function parseV4(text: string): bigint | null {
  const parts = text.split('.');
  if (parts.length !== 4) return null;
  let v = 0n;
  for (const p of parts) {
    if (!/^\d{1,3}$/.test(p) || Number(p) > 255 || (p.length > 1 && p.startsWith('0'))) return null;
    v = (v << 8n) | BigInt(p);
  }
  return v;
}

function parseV6(text: string): bigint | null {
  if (text.includes('%')) return null; // a zone names an interface of someone's host
  let head = text;
  let tailV4: bigint | null = null;
  const lastColon = text.lastIndexOf(':');
  if (text.includes('.')) {
    tailV4 = parseV4(text.slice(lastColon + 1));
    if (tailV4 === null) return null;
    head = `${text.slice(0, lastColon + 1)}0:0`; // two groups standing in for the IPv4 tail
  }
  const halves = head.split('::');
  if (halves.length > 2) return null;
  const groups = (s: string): string[] | null => (s === '' ? [] : s.split(':'));
  const left = groups(halves[0] ?? '');
  const right = halves.length === 2 ? groups(halves[1] ?? '') : [];
  if (left === null || right === null) return null;
  const missing = 8 - left.length - right.length;
  if (halves.length === 2 ? missing < 1 : missing !== 0) return null;
  let v = 0n;
  for (const g of [...left, ...Array<string>(missing).fill('0'), ...right]) {
    if (!/^[0-9a-fA-F]{1,4}$/.test(g)) return null;
    v = (v << 16n) | BigInt(`0x${g}`);
  }
  if (tailV4 !== null) v = (v & ~0xffffffffn) | tailV4;
  return v;
}

/** An IPv4 or IPv6 address in any of its spellings; null if it is none. */
export function parseIp(text: string): Ip | null {
  const t = text.trim();
  if (t.includes(':')) {
    const v = parseV6(t);
    return v === null ? null : { version: 6, value: v };
  }
  const v = parseV4(t);
  return v === null ? null : { version: 4, value: v };
}

/** `fd00::/8`, `198.18.1.0/24` (host bits ignored) or a bare address (one host); null if none. */
export function parsePrefix(text: string): Prefix | null {
  const [addr = '', len, ...rest] = text.trim().split('/');
  if (rest.length) return null;
  const ip = parseIp(addr);
  if (ip === null) return null;
  const bits = BITS[ip.version];
  if (len === undefined) return { ...ip, length: bits };
  if (!/^\d{1,3}$/.test(len) || Number(len) > bits) return null;
  const length = Number(len);
  const mask = length === 0 ? 0n : ((1n << BigInt(length)) - 1n) << BigInt(bits - length);
  return { version: ip.version, value: ip.value & mask, length };
}

export function inPrefix(ip: Ip, p: Prefix): boolean {
  if (ip.version !== p.version) return false;
  const shift = BigInt(BITS[p.version] - p.length);
  return ip.value >> shift === p.value >> shift;
}

/** `198.18.1.10:4000` or `[fd00::10]:4000`; null for anything else. */
export function parseEndpoint(text: string | null | undefined): Endpoint | null {
  if (!text) return null;
  const m = /^\[([^\]]+)\]:(\d{1,5})$/.exec(text) ?? /^([0-9.]+):(\d{1,5})$/.exec(text);
  if (!m?.[1] || !m[2]) return null;
  const ip = parseIp(m[1]);
  const port = Number(m[2]);
  return ip === null || port > 65535 ? null : { ip, port };
}

/** Endpoints in address order: IPv4 before IPv6, numerically (not as text:
 * 198.18.1.9 before 198.18.1.10), then by port; what does not parse goes last. */
export function compareEndpoints(a: string | null | undefined, b: string | null | undefined): number {
  const x = parseEndpoint(a);
  const y = parseEndpoint(b);
  if (x === null || y === null) return x === y ? 0 : x === null ? 1 : -1;
  if (x.ip.version !== y.ip.version) return x.ip.version - y.ip.version;
  if (x.ip.value !== y.ip.value) return x.ip.value < y.ip.value ? -1 : 1;
  return x.port - y.port;
}

/** The endpoint within `max` characters: a long IPv6 address loses its middle
 * (`[2001:db8:12…9abc:def0]:5004`), the port and both ends of the address stay. */
export function fitEndpoint(text: string, max: number): string {
  if (text.length <= max) return text;
  const m = /^\[([^\]]+)\](:\d+)$/.exec(text);
  if (!m?.[1] || !m[2]) return text;
  const keep = max - m[2].length - 3; // brackets and the ellipsis
  if (keep < 4) return text;
  const head = Math.ceil(keep / 2);
  return `[${m[1].slice(0, head)}…${m[1].slice(m[1].length - (keep - head))}]${m[2]}`;
}
