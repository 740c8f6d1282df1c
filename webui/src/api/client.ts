// Typed HTTP client generated from the server's OpenAPI (openapi-fetch):
// a path, parameter or response that does not match the schema fails tsc.
import createClient, { type Middleware } from 'openapi-fetch';
import type { paths } from './schema';
import { ApiError, errorMessage, notifyUnauthorized, tokenStore } from './http';

const auth: Middleware = {
  onRequest({ request }) {
    const token = tokenStore.get();
    if (token && !request.headers.has('Authorization')) request.headers.set('Authorization', `Bearer ${token}`);
    return request;
  },
  onResponse({ response, request }) {
    if (response.status === 401 && request.headers.has('Authorization')) notifyUnauthorized();
    return response;
  },
};

// fetch is looked up per call (not captured at start), so wrappers and test stubs apply.
export const client = createClient<paths>({ baseUrl: globalThis.location.origin, fetch: (req) => globalThis.fetch(req) });
client.use(auth);

/** openapi-fetch result → data, or an ApiError carrying the server's message. */
export async function unwrap<T>(
  p: Promise<{ data?: T; error?: unknown; response: Response }>,
): Promise<T> {
  let r: { data?: T; error?: unknown; response: Response };
  try {
    r = await p;
  } catch (e) {
    throw new ApiError(0, `server unreachable (${e instanceof Error ? e.message : String(e)})`);
  }
  if (!r.response.ok) {
    throw new ApiError(r.response.status, errorMessage(r.error, `${r.response.status} ${r.response.statusText}`));
  }
  return r.data as T;
}
