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

/** Our credentials were refused: forget them so the app shows the login page. */
export function notifyUnauthorized(): void {
  tokenStore.set(null);
  unauthorizedListeners.forEach((fn) => { fn(); });
}

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
