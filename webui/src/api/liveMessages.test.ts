import { describe, expect, it } from 'vitest';
import { parseLiveMessage } from './liveMessages';

describe('parseLiveMessage', () => {
  it('accepts the server topics', () => {
    expect(parseLiveMessage('{"topic":"hello","topics":["events","sessions"]}')).toEqual({ topic: 'hello', topics: ['events', 'sessions'] });
    const m = parseLiveMessage(JSON.stringify({
      topic: 'sessions',
      items: [{ id: 3, session_key: 'k', call_id: 'c', state: 'active', offloaded: true, started_at: '2026-01-01T00:00:00Z' }],
    }));
    expect(m).toMatchObject({ topic: 'sessions', items: [{ id: 3 }] });
    expect(parseLiveMessage('{"topic":"overflow"}')).toEqual({ topic: 'overflow' });
  });
  it('refuses malformed messages with a reason', () => {
    expect(parseLiveMessage('not json')).toEqual(new Error('live: message is not JSON'));
    expect(parseLiveMessage('{"items":[]}')).toEqual(new Error('live: message without a topic'));
    expect(parseLiveMessage('{"topic":"weather","items":[]}')).toEqual(new Error('live: unknown topic weather'));
    expect(parseLiveMessage('{"topic":"samples"}')).toEqual(new Error('live: samples message without items'));
    expect(parseLiveMessage('{"topic":"events","items":[{"id":"7","type":"reroute","ts":"x","severity":"info"}]}'))
      .toEqual(new Error('live: events item: id must be a number'));
  });
});
