// Messages of the server's live stream, narrowed from untrusted JSON. Anything
// unexpected is reported (console + counter), never thrown into React.
import type { EventItem, QueueSample, SessionSummary } from './types';

export type LiveMessage =
  | { kind: 'session'; session: SessionSummary }
  | { kind: 'session_removed'; id: string }
  | { kind: 'event'; event: EventItem }
  | { kind: 'queue'; switchId: string; sample: QueueSample }
  | { kind: 'ignored'; type: string };

function isObj(x: unknown): x is Record<string, unknown> {
  return typeof x === 'object' && x !== null && !Array.isArray(x);
}

export function parseLiveMessage(raw: string): LiveMessage[] | Error {
  let msg: unknown;
  try {
    msg = JSON.parse(raw);
  } catch {
    return new Error('live: message is not JSON');
  }
  const list = Array.isArray(msg) ? msg : [msg];
  const out: LiveMessage[] = [];
  for (const m of list) {
    if (!isObj(m) || typeof m.type !== 'string') return new Error('live: message without a type');
    const data = m.data;
    switch (m.type) {
      case 'session':
        if (!isObj(data) || typeof data.id !== 'string') return new Error('live: session message without id');
        out.push({ kind: 'session', session: data as unknown as SessionSummary });
        break;
      case 'session_removed':
        if (!isObj(data) || typeof data.id !== 'string') return new Error('live: session_removed without id');
        out.push({ kind: 'session_removed', id: data.id });
        break;
      case 'event':
        if (!isObj(data) || typeof data.kind !== 'string') return new Error('live: event without kind');
        out.push({ kind: 'event', event: data as unknown as EventItem });
        break;
      case 'queue':
        if (!isObj(data) || typeof data.switch_id !== 'string') return new Error('live: queue sample without switch');
        out.push({ kind: 'queue', switchId: data.switch_id, sample: data as unknown as QueueSample });
        break;
      default:
        out.push({ kind: 'ignored', type: m.type });
    }
  }
  return out;
}
