// Seed data posted through the real ingest API (POST /api/v1/ingest) the way
// rtpagent and the switch collector send it. Shapes are the generated schema's.
import { randomUUID } from 'node:crypto';
import type { components } from '../src/api/schema';

type Batch = components['schemas']['IngestBatch'];
type SessionUpsert = components['schemas']['SessionUpsert'];
type QualitySampleIn = components['schemas']['QualitySampleIn'];
type EventIn = components['schemas']['EventIn'];
type IngestResult = components['schemas']['IngestResult'];

export const SWITCH = 'sw1';
export const ACTIVE_CALLS = 300;
export const ENDED_CALLS = 40;
/** The call that gets a reroute event (and a full quality history). */
export const REROUTED = 7;
/** A call answered 4 s before the seed, with 3 s of samples. */
export const YOUNG = 299;
/** Ports the collector reports; port 2 congests for the last 2 minutes. */
export const PORTS = [1, 2, 3, 4] as const;
export const CONGESTED_PORT = 2;
/** Collector cell size: depth = cells × 80 B. */
export const CELL_BYTES = 80;
/** A second switch whose queues only INT reports (bytes and delay per hop). */
export const INT_SWITCH = 'sw2';
export const INT_PORTS = [1, 3] as const;
/** The watched destination the reroute moved, off sw1's congested port 2 onto the backup by port 4. */
export const REROUTE_FLOW = '198.18.2.0/24';
export const PRIMARY_PATH = 'port 2';
export const BACKUP_PATH = 'nexthop 4 port 4';
export const REROUTE_AGO_MS = 30_000;

export async function ingest(baseUrl: string, token: string, batch: Omit<Batch, 'idempotency_key'>): Promise<IngestResult> {
  const res = await fetch(`${baseUrl}/api/v1/ingest`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ idempotency_key: randomUUID(), ...batch }),
  });
  if (!res.ok) throw new Error(`ingest: ${String(res.status)} ${await res.text()}`);
  return (await res.json()) as IngestResult;
}

const iso = (ms: number) => new Date(ms).toISOString();

export function callId(i: number): string {
  return `e2e-call-${String(i).padStart(4, '0')}@198.18.1.10`;
}

export function sessionKey(i: number): string {
  return `${callId(i)};ft${String(i)}`;
}

/** Call `i`, started 2-8 minutes before `now` (or `startedAgoS` seconds). */
export function session(i: number, now: number, over: Partial<SessionUpsert> = {}, startedAgoS?: number): SessionUpsert {
  const offloaded = i % 5 !== 0;
  const started = now - (startedAgoS ?? 120 + (i % 50) * 7) * 1000;
  const uacPort = 6000 + 2 * i;
  const relayPort = 20000 + 4 * (i % 2500);
  return {
    session_key: `${callId(i)};ft${String(i)}`,
    seq: 1,
    call_id: callId(i),
    from_tag: `ft${String(i)}`,
    to_tag: `tt${String(i)}`,
    state: 'active',
    offloaded,
    offload_reason: offloaded ? null : i % 10 === 0 ? 'relay table full' : 'codec not offloadable',
    codec: 'PCMU',
    plc: true,
    switch: SWITCH,
    started_at: iso(started),
    answered_at: iso(started + 2000),
    ended_at: null,
    legs: [
      {
        direction: 'caller_to_callee', media_index: 0, switch_leg: offloaded ? 2 * i : null,
        src: { addr: '198.18.1.10', port: uacPort }, relay_in: { addr: '198.18.0.10', port: relayPort },
        relay_out: { addr: '198.18.0.10', port: relayPort + 2 }, dst: { addr: '198.18.2.10', port: uacPort },
        installed: offloaded, installed_at: offloaded ? iso(started + 2000) : null,
      },
      {
        direction: 'callee_to_caller', media_index: 0, switch_leg: offloaded ? 2 * i + 1 : null,
        src: { addr: '198.18.2.10', port: uacPort }, relay_in: { addr: '198.18.0.10', port: relayPort + 2 },
        relay_out: { addr: '198.18.0.10', port: relayPort }, dst: { addr: '198.18.1.10', port: uacPort },
        installed: offloaded, installed_at: offloaded ? iso(started + 2000) : null,
      },
    ],
    ...over,
  };
}

export function samples(i: number, now: number, seconds: number, lossPerInterval?: number): QualitySampleIn[] {
  const out: QualitySampleIn[] = [];
  // Every 9th call is impaired (MOS well below 3.6); the rerouted call degrades then recovers.
  for (let t = seconds; t >= 1; t--) {
    const ts = now - t * 1000;
    for (const direction of ['caller_to_callee', 'callee_to_caller'] as const) {
      let lost = lossPerInterval ?? (i % 9 === 0 ? 6 : 0);
      let jitter = 0.3 + (i % 7) * 0.2;
      if (i === REROUTED && t > seconds / 3 && t < (2 * seconds) / 3) {
        lost = direction === 'caller_to_callee' ? 4 : 1;
        jitter = 12;
      }
      out.push({
        session_key: `${callId(i)};ft${String(i)}`, direction, ts: iso(ts), interval_ms: 1000,
        packets: 50 - lost, bytes: 8000, lost, reordered: 0, jitter_ms: jitter, delay_ms: 20, burst_ratio: null,
      });
    }
  }
  return out;
}

function event(type: EventIn['type'], ts: number, payload: Record<string, unknown>, over: Partial<EventIn> = {}): EventIn {
  return { event_id: randomUUID(), type, ts: iso(ts), severity: 'info', switch: SWITCH, payload, ...over };
}

/** What the collector would read: 4 relay entries per offloaded call, Tofino's default size. */
export const RELAY_TABLE_CAPACITY = 65_536;
export const RELAY_TABLE_USED = 1_000;

export async function seed(baseUrl: string, token: string): Promise<void> {
  const now = Date.now();
  // The collector: the switch, its ports and 5 minutes of queue samples (port 2 congests).
  const queue: Batch['queue_samples'] = [];
  for (let t = 300; t >= 1; t--) {
    for (const port of PORTS) {
      const hot = port === CONGESTED_PORT && t < 120;
      const wave = Math.sin((t + port * 13) / 17);
      // As the collector sends them: depth in bytes (usage cells × 80 B), no packet count.
      queue.push({
        switch: SWITCH, dev_port: port, queue: 0, ts: iso(now - t * 1000),
        depth_pkts: null,
        depth_bytes: CELL_BYTES * Math.round(hot ? 6000 + 2000 * wave : 200 + 150 * wave + port * 50),
        queue_delay_us: hot ? 4200 + 1500 * wave : 180 + 90 * wave + port * 20,
        utilisation: Math.min(1, hot ? 0.97 : 0.35 + 0.1 * wave + port * 0.05),
        drops: hot && t % 5 === 0 ? 12 : 0,
      });
    }
  }
  await ingest(baseUrl, token, {
    switch: {
      name: SWITCH, grpc_address: '198.19.0.1:50052', device_id: 0, up: true,
      relay_table_used: RELAY_TABLE_USED, relay_table_capacity: RELAY_TABLE_CAPACITY,
      ports: [1, 2, 3, 4].map((p) => ({ dev_port: p, name: `p4r-sw-${String(p)}`, speed_mbps: 10_000, up: true })),
    },
    queue_samples: queue,
    events: [
      event('switch_up', now - 300_000, {}),
      event('congestion_onset', now - 120_000, { dev_port: 2, queue_delay_us: 4200 }, { severity: 'warning' }),
      event('ired_drop', now - 100_000, { dev_port: 2, drops: 37 }, { severity: 'warning' }),
      event('ired_drop', now - 60_000, { dev_port: 2, drops: 21 }, { severity: 'warning' }),
      event('congestion_onset', now - 250_000, { dev_port: 3 }, { severity: 'warning' }),
      event('congestion_clear', now - 200_000, { dev_port: 3 }),
    ],
  });

  // INT from the second switch: bytes and delay per hop, as the report listener sends them.
  const intQueue: Batch['queue_samples'] = [];
  for (let t = 300; t >= 1; t--) {
    for (const port of INT_PORTS) {
      intQueue.push({
        switch: INT_SWITCH, dev_port: port, queue: 0, ts: iso(now - t * 1000),
        depth_bytes: CELL_BYTES * Math.round(100 + 60 * Math.sin((t + port) / 11) + port * 20),
        queue_delay_us: 90 + 40 * Math.sin((t + port) / 11),
        drops: 0,
      });
    }
  }
  await ingest(baseUrl, token, { queue_samples: intQueue });

  // The agent: active and ended calls, their quality, their events.
  const sessions: SessionUpsert[] = [];
  for (let i = 1; i <= ACTIVE_CALLS; i++) {
    sessions.push(session(i, now, {}, i === YOUNG ? 6 : undefined));
  }
  for (let i = ACTIVE_CALLS + 1; i <= ACTIVE_CALLS + ENDED_CALLS; i++) {
    sessions.push(session(i, now - 3_600_000, { state: 'ended', ended_at: iso(now - 3_000_000), packets: 60_000, lost: i % 30 }));
  }
  await ingest(baseUrl, token, { agent: { name: 'relay-1', rtpproxy: 'udp:127.0.0.1:22223', switch: SWITCH }, sessions });

  const all: QualitySampleIn[] = [...samples(REROUTED, now, 90)];
  for (let i = 1; i <= ACTIVE_CALLS; i++) if (i !== REROUTED) all.push(...samples(i, now, i === YOUNG ? 3 : i <= 20 ? 30 : 2));
  // Ended calls: a minute of history an hour ago (their MOS shows in the audit).
  for (let i = ACTIVE_CALLS + 1; i <= ACTIVE_CALLS + ENDED_CALLS; i++) all.push(...samples(i, now - 3_060_000, 60));
  for (let k = 0; k < all.length; k += 10_000) await ingest(baseUrl, token, { samples: all.slice(k, k + 10_000) });

  const rk = `${callId(REROUTED)};ft${String(REROUTED)}`;
  await ingest(baseUrl, token, {
    events: [
      event('offload_installed', now - 95_000, { entries: 2 }, { session_key: rk }),
      // As `p4relay-controlplane` sends it: the watched destination, not a call (the server links the calls).
      event('reroute', now - REROUTE_AGO_MS, {
        flow: REROUTE_FLOW, from_path: PRIMARY_PATH, to_path: BACKUP_PATH, trigger: 'queue delay 4.2 ms > t_q 2 ms for 5 packets',
        direction: 'to_backup', slot: 0, run: 5,
      }, { session_key: rk, severity: 'warning', message: `${REROUTE_FLOW} moved off port 2` }),
      event('offload_failed', now - 80_000, { reason: 'relay table full' }, { session_key: `${callId(10)};ft10`, severity: 'error' }),
      event('fallback', now - 79_000, { reason: 'relay table full: media stays on RTPProxy' }, { session_key: `${callId(10)};ft10`, severity: 'warning' }),
    ],
  });
}
