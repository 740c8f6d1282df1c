// The one place that talks HTTP: adds the bearer token, turns error bodies into
// ApiError with the server's message, and signals 401s so the app can log out.

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

export const tokenStore = {
  get(): string | null {
    return localStorage.getItem(TOKEN_KEY);
  },
  set(token: string | null): void {
    if (token) localStorage.setItem(TOKEN_KEY, token);
    else localStorage.removeItem(TOKEN_KEY);
  },
  onUnauthorized(fn: Listener): () => void {
    unauthorizedListeners.add(fn);
    return () => unauthorizedListeners.delete(fn);
  },
};

/** FastAPI errors: {"detail": "text"} or {"detail": [{"loc": [...], "msg": "..."}]}. */
export function errorMessage(body: unknown, fallback: string): string {
  if (body && typeof body === 'object' && 'detail' in body) {
    const detail = (body).detail;
    if (typeof detail === 'string') return detail;
    if (Array.isArray(detail)) {
      return detail
        .map((d: unknown) => {
          if (d && typeof d === 'object') {
            const { loc, msg } = d as { loc?: unknown; msg?: unknown };
            const where = Array.isArray(loc) ? loc.filter((x) => x !== 'body').join('.') : '';
            return where ? `${where}: ${String(msg)}` : String(msg);
          }
          return String(d);
        })
        .join('; ');
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
  if (res.status === 401 && token) {
    tokenStore.set(null);
    unauthorizedListeners.forEach((fn) => { fn(); });
  }
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

export async function apiJson<T>(path: string, init: RequestInit = {}): Promise<T> {
  const headers = new Headers(init.headers);
  if (init.body && typeof init.body === 'string' && !headers.has('Content-Type')) {
    headers.set('Content-Type', 'application/json');
  }
  const res = await apiFetch(path, { ...init, headers });
  if (res.status === 204) return undefined as T;
  return (await res.json()) as T;
}

/** Builds `?a=1&b=2`, skipping empty values. */
export function query(params: Record<string, string | number | boolean | null | undefined>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v === undefined || v === null || v === '') continue;
    q.set(k, String(v));
  }
  const s = q.toString();
  return s ? `?${s}` : '';
}
