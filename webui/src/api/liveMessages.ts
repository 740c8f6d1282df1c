// Messages of the server's live stream (WS /api/v1/live), narrowed from
// untrusted JSON: `{"topic": "sessions"|"samples"|"queues"|"events", "items": [...]}`,
// plus `hello` on connect and `overflow` before the server drops a slow client.
import type { LiveEventItem, LiveQueueItem, LiveSampleItem, LiveSessionItem } from './types';

export type LiveMessage =
  | { topic: 'hello'; topics: string[] }
  | { topic: 'overflow' }
  | { topic: 'sessions'; items: LiveSessionItem[] }
  | { topic: 'samples'; items: LiveSampleItem[] }
  | { topic: 'queues'; items: LiveQueueItem[] }
  | { topic: 'events'; items: LiveEventItem[] };

function isObj(x: unknown): x is Record<string, unknown> {
  return typeof x === 'object' && x !== null && !Array.isArray(x);
}

/** Fields each item must have; anything else would break the views, so it is refused whole. */
const REQUIRED: Record<string, [string, string][]> = {
  sessions: [['id', 'number'], ['session_key', 'string'], ['call_id', 'string'], ['state', 'string'], ['offloaded', 'boolean'], ['started_at', 'string']],
  samples: [['session_key', 'string'], ['direction', 'string'], ['ts', 'string'], ['packets', 'number'], ['lost', 'number']],
  queues: [['switch_id', 'number'], ['dev_port', 'number'], ['ts', 'string']],
  events: [['id', 'number'], ['type', 'string'], ['ts', 'string'], ['severity', 'string']],
};

export function parseLiveMessage(raw: string): LiveMessage | Error {
  let msg: unknown;
  try {
    msg = JSON.parse(raw);
  } catch {
    return new Error('live: message is not JSON');
  }
  if (!isObj(msg) || typeof msg.topic !== 'string') return new Error('live: message without a topic');
  const topic = msg.topic;
  if (topic === 'hello') return { topic, topics: Array.isArray(msg.topics) ? msg.topics.map(String) : [] };
  if (topic === 'overflow') return { topic };
  const fields = REQUIRED[topic];
  if (!fields) return new Error(`live: unknown topic ${topic}`);
  if (!Array.isArray(msg.items)) return new Error(`live: ${topic} message without items`);
  for (const item of msg.items) {
    if (!isObj(item)) return new Error(`live: ${topic} item is not an object`);
    for (const [k, t] of fields) {
      if (typeof item[k] !== t) return new Error(`live: ${topic} item: ${k} must be a ${t}`);
    }
  }
  return { topic, items: msg.items } as LiveMessage;
}
