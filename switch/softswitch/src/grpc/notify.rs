//! Notifications pushed on StreamChannel: learn digests (batched into
//! DigestList) and idle timeouts of `pipe.Ingress.relay`.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::Duration;

use super::codec::df_int128;
use super::{pb, pipe_of, Switch, DEVICE_ID};
use crate::contract::names;
use crate::pipeline::{LearnDigest, LearnDigest6, RerouteDigest};
use crate::schema::TableKind;
use crate::sys::now_ms;

const DIGEST_BATCH: usize = 256;
const DIGEST_LINGER: Duration = Duration::from_millis(2);

fn target() -> pb::TargetDevice {
    pb::TargetDevice {
        device_id: DEVICE_ID,
        pipe_id: 0xffff,
        direction: 0xff,
        prsr_id: 0xff,
    }
}

/// A digest list's target: bf_switchd's learn callback is per pipe, so a
/// list carries the pipe whose ingress raised its digests.
fn pipe_target(pipe: u32) -> pb::TargetDevice {
    pb::TargetDevice {
        pipe_id: pipe,
        ..target()
    }
}

impl Switch {
    /// Sends to every subscriber that asked for this kind; a full or closed
    /// channel loses the message for that client (counted).
    fn broadcast(
        &self,
        msg: pb::StreamMessageResponse,
        want: impl Fn(&super::Subscriber) -> bool,
    ) -> usize {
        let subs = self.subscribers.lock();
        let mut sent = 0;
        for s in subs.values().filter(|s| want(s)) {
            if s.tx.try_send(Ok(msg.clone())).is_ok() {
                sent += 1;
            } else {
                self.notifications_dropped.fetch_add(1, Relaxed);
            }
        }
        sent
    }
}

/// A digest the data plane raises: its contract name and fields, and the
/// values of one, in the same order.
pub trait Digest<const N: usize>: Send + 'static {
    const NAME: &'static str;
    const FIELDS: [&'static str; N];
    fn values(&self) -> [u128; N];
    /// The pipe that raised it: its ingress port's.
    fn pipe(&self) -> u32;
    fn log_sent(digests: usize, subscribers: usize) {
        tracing::debug!(digests, subscribers, kind = Self::NAME, "digests sent");
    }
}

/// The learn digests of both families: the same fields, each address widened to
/// 128 bits (an IPv4 one is its 32-bit value).
macro_rules! learn_digest {
    ($digest:ty, $name:expr) => {
        impl Digest<5> for $digest {
            const NAME: &'static str = $name;
            const FIELDS: [&'static str; 5] = [
                "src_addr",
                "dst_addr",
                "src_port",
                "dst_port",
                "ingress_port",
            ];
            fn values(&self) -> [u128; 5] {
                [
                    u128::from(self.src),
                    u128::from(self.dst),
                    u128::from(self.sport),
                    u128::from(self.dport),
                    u128::from(self.ingress_port),
                ]
            }
            fn pipe(&self) -> u32 {
                pipe_of(u32::from(self.ingress_port))
            }
        }
    };
}
learn_digest!(LearnDigest, names::LEARN_DIGEST);
learn_digest!(LearnDigest6, names::LEARN6_DIGEST);

/// `pipe.IngressDeparser.reroute` digests: rare, and each one a reroute
/// decision, so logged at info.
impl Digest<10> for RerouteDigest {
    const NAME: &'static str = names::REROUTE_DIGEST;
    const FIELDS: [&'static str; 10] = [
        "dst_addr",
        "slot",
        "kind",
        "port",
        "queue_delay_ns",
        "run",
        "flow_class",
        "from_int",
        "hop_switch_id",
        "hop_port",
    ];
    fn values(&self) -> [u128; 10] {
        [
            u128::from(self.dst_addr),
            u128::from(self.slot),
            u128::from(self.kind),
            u128::from(self.port),
            u128::from(self.queue_delay_ns),
            u128::from(self.run),
            u128::from(self.flow_class),
            u128::from(self.from_int),
            u128::from(self.hop_switch_id),
            u128::from(self.hop_port),
        ]
    }
    /// Its ingress port is not carried; every port of the softswitch is in
    /// its one pipe.
    fn pipe(&self) -> u32 {
        0
    }
    fn log_sent(digests: usize, subscribers: usize) {
        tracing::info!(digests, subscribers, "reroute digests sent");
    }
}

/// Collects digests from the data plane and sends them as DigestLists
/// (batched: up to DIGEST_BATCH, lingering DIGEST_LINGER for more) to the
/// clients that enabled learn notifications (bf_switchd has one flag for
/// every digest).
pub fn run_digests<D: Digest<N>, const N: usize>(sw: Arc<Switch>, rx: Receiver<D>) {
    let d = sw
        .schema
        .digests
        .iter()
        .find(|d| d.name == D::NAME)
        .expect("contract digest");
    let fields = D::FIELDS.map(|name| {
        d.fields
            .iter()
            .find(|f| f.name == name)
            .expect("contract digest field")
    });
    let mut list_id = 0u32;
    loop {
        let first = match rx.recv() {
            Ok(x) => x,
            Err(_) => return,
        };
        let mut batch = vec![first];
        while batch.len() < DIGEST_BATCH {
            match rx.recv_timeout(DIGEST_LINGER) {
                Ok(x) => batch.push(x),
                Err(RecvTimeoutError::Timeout) => break,
                Err(RecvTimeoutError::Disconnected) => return,
            }
        }
        // One list per pipe, as bf_switchd's per-pipe learn callbacks send them.
        let mut pipes: Vec<u32> = batch.iter().map(Digest::pipe).collect();
        pipes.sort_unstable();
        pipes.dedup();
        for pipe in pipes {
            list_id = list_id.wrapping_add(1);
            let data = batch
                .iter()
                .filter(|g| g.pipe() == pipe)
                .map(|g| pb::TableData {
                    action_id: 0,
                    fields: fields
                        .iter()
                        .zip(g.values())
                        .map(|(f, v)| df_int128(f.id, v, f.bits))
                        .collect(),
                })
                .collect();
            let msg = pb::StreamMessageResponse {
                update: Some(pb::stream_message_response::Update::Digest(
                    pb::DigestList {
                        digest_id: d.id,
                        list_id,
                        data,
                        target: Some(pipe_target(pipe)),
                    },
                )),
            };
            let n = sw.broadcast(msg, |s| s.learn);
            D::log_sent(batch.len(), n);
        }
    }
}

/// Sweeps the relay table for idle entries and notifies.
pub fn run_idle(sw: Arc<Switch>, stop: Arc<std::sync::atomic::AtomicBool>) {
    let t = sw.schema.table_by_kind(TableKind::Relay);
    let t6 = sw.schema.table_by_kind(TableKind::Relay6);
    let mut last_sweep = Duration::ZERO;
    while !stop.load(Relaxed) {
        // A sweep of millions of entries takes tens of ms: keep it under ~10 % of a core.
        // POLL mode: no ageing, no notifications (hit states are sampled).
        let relay_on = sw.idle.enabled.load(Relaxed) && !sw.idle.poll.load(Relaxed);
        let relay6_on = sw.idle6.enabled.load(Relaxed);
        let ms = match (relay_on, relay6_on) {
            (true, true) => sw
                .idle
                .interval_ms
                .load(Relaxed)
                .min(sw.idle6.interval_ms.load(Relaxed)),
            (false, true) => sw.idle6.interval_ms.load(Relaxed),
            _ => sw.idle.interval_ms.load(Relaxed),
        };
        std::thread::sleep(Duration::from_millis(u64::from(ms)).max(last_sweep * 9));
        if !relay_on && !relay6_on {
            continue;
        }
        let t0 = std::time::Instant::now();
        let mut expired = Vec::new();
        let pl = &sw.pipeline;
        let now = now_ms();
        if relay_on {
            pl.relay.sweep_idle_with(
                now,
                |k| pl.fast_last_hit(k),
                |k| expired.push((t.id, super::entries::relay::key_pb(t, &k))),
            );
        }
        if relay6_on {
            pl.relay6.sweep_idle_with(
                now,
                |k| pl.fast_last_hit6(k),
                |k| expired.push((t6.id, super::entries::relay6::relay6_key_pb(t6, &k))),
            );
        }
        last_sweep = t0.elapsed();
        for (table_id, key) in expired {
            let msg = pb::StreamMessageResponse {
                update: Some(
                    pb::stream_message_response::Update::IdleTimeoutNotification(
                        pb::IdleTimeoutNotification {
                            target: Some(target()),
                            table_entry: Some(pb::TableEntry {
                                table_id,
                                value: Some(pb::table_entry::Value::Key(key)),
                                data: None,
                                is_default_entry: false,
                                entry_tgt: None,
                                table_flags: None,
                            }),
                            r#type: pb::idle_timeout_notification::NotificationType::EntryIdle
                                as i32,
                        },
                    ),
                ),
            };
            sw.broadcast(msg, |s| s.idle);
        }
    }
}
