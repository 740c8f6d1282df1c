// Credentials and errors: the bearer token, ApiError with the server's message,
// and the 401 signal that logs the console out. apiFetch is for non-JSON
// answers (CSV); JSON goes through the typed client (client.ts).

const TOKEN_KEY = 'p4relay.token';

export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

type Listener = () => void;
const unauthorizedListeners = new Set<Listener>();

const EXPIRES_KEY = 'p4relay.token.expires';

export const tokenStore = {
  get(): string | null {
    return localStorage.getItem(TOKEN_KEY);
  },
  /** The token and, for a login, when it expires (ISO 8601; refreshed before then). */
  set(token: string | null, expiresAt?: string): void {
    if (token) localStorage.setItem(TOKEN_KEY, token);
    else localStorage.removeItem(TOKEN_KEY);
    if (token && expiresAt) localStorage.setItem(EXPIRES_KEY, expiresAt);
    else localStorage.removeItem(EXPIRES_KEY);
  },
  /** Expiry in ms since the epoch; null when unknown. */
  expiresAt(): number | null {
    const v = localStorage.getItem(EXPIRES_KEY);
    const t = v ? Date.parse(v) : NaN;
    return Number.isNaN(t) ? null : t;
  },
  onUnauthorized(fn: Listener): () => void {
    unauthorizedListeners.add(fn);
    return () => unauthorizedListeners.delete(fn);
  },
};

/** Our credentials were refused: forget them so the app shows the login page. */
export function notifyUnauthorized(): void {
  tokenStore.set(null);
  unauthorizedListeners.forEach((fn) => { fn(); });
}

/** Location segments a person can read: field names and indexes, not
 * pydantic's internal union/validator tags like `lax-or-strict[...]`. */
function readableLoc(loc: unknown): string {
  if (!Array.isArray(loc)) return '';
  return loc
    .filter((x): x is string | number => (typeof x === 'string' && /^[A-Za-z_][\w-]*$/.test(x) && x !== 'body') || typeof x === 'number')
    .filter((x) => typeof x === 'number' || !/^(lax-or-strict|json-or-python|function-\w+|union|tagged-union)$/.test(x))
    .join('.');
}

/** FastAPI errors: {"detail": "text"} or {"detail": [{"loc": [...], "msg": "..."}]};
 * messages for the same field are joined ("a or b" for union types). */
export function errorMessage(body: unknown, fallback: string): string {
  if (body && typeof body === 'object' && 'detail' in body) {
    const detail = (body).detail;
    if (typeof detail === 'string') return detail;
    if (Array.isArray(detail)) {
      const byLoc = new Map<string, string[]>();
      for (const d of detail as unknown[]) {
        const { loc, msg } = (d && typeof d === 'object' ? d : { msg: d }) as { loc?: unknown; msg?: unknown };
        const where = readableLoc(loc);
        const text = typeof msg === 'string' ? msg : JSON.stringify(msg);
        const list = byLoc.get(where) ?? [];
        if (!list.includes(text)) list.push(text);
        byLoc.set(where, list);
      }
      return [...byLoc].map(([where, msgs]) => (where ? `${where}: ${msgs.join(' or ')}` : msgs.join(' or '))).join('; ');
    }
  }
  return fallback;
}

export async function apiFetch(path: string, init: RequestInit = {}): Promise<Response> {
  const headers = new Headers(init.headers);
  const token = tokenStore.get();
  if (token && !headers.has('Authorization')) headers.set('Authorization', `Bearer ${token}`);
  let res: Response;
  try {
    res = await fetch(path, { ...init, headers });
  } catch (e) {
    throw new ApiError(0, `server unreachable (${e instanceof Error ? e.message : String(e)})`);
  }
  if (res.status === 401 && token) notifyUnauthorized();
  if (!res.ok) {
    let body: unknown = null;
    try {
      body = await res.json();
    } catch {
      /* non-JSON error body: fall back to the status text */
    }
    throw new ApiError(res.status, errorMessage(body, `${res.status} ${res.statusText}`));
  }
  return res;
}
