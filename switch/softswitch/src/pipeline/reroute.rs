//! `Reroute` and `RerouteDetect` (switch/p4/controls/reroute.p4): congestion
//! detection after the queue, and the move to a pre-installed backup next hop
//! without a control-plane round trip, at this switch or, by notices passed
//! on hop by hop, at the nearest one upstream that has a backup.
//!
//! - `reroute` (ingress, beside ipv4_lpm): a watched destination's packet
//!   takes its backup next hop while `reroute_active[slot]` is 1; otherwise it
//!   is marked for detection (`Bridged::rr_detect`). A slot without a backup
//!   records the port its flow comes in by (`reroute_from[slot]`).
//! - `reroute_detect` (egress, as the packet leaves its queue): with the flow
//!   class's `t_q` and `m` (`reroute_class`), a departure whose delay from
//!   ingress (the 48-bit timestamps apart, in 65,536 ns ticks, tna.rs)
//!   exceeds `t_q` (in whole ticks)
//!   stamps `reroute_port_hot[port]`; a marked packet that is over `t_q`, or
//!   (the INT sink) whose INT stack has the onset bit, advances
//!   `reroute_run[slot]`; a clear one resets it. The m-th hot packet in a row
//!   queues a notice frame, as Tofino's egress mirror copy does, and the data
//!   plane feeds it to its own ingress from `RECIRC_PORT`
//!   (`Pipeline::take_notice`, the recirculation).
//! - `reroute_notice` (ingress): a LOCAL notice of this switch's own delay
//!   from the recirculation port moves a slot with a backup
//!   (`reroute_active` = 1, digest `MOVED`); without a backup, or seen in INT
//!   (the congested hop is upstream), it leaves as an UPSTREAM notice by the
//!   flow's ingress port (digest `NOTIFIED`). An UPSTREAM notice arriving by
//!   the watched route's primary port moves the receiver's slot if it has a
//!   backup, else goes on by `reroute_from[slot]` with its TTL one less
//!   (digest `RELAYED`; TTL <= 1 ends it). Everything else is dropped. A
//!   notice carries the flow's IPv4 or IPv6 header: IPv6 destinations are
//!   watched by `reroute_watch6`, with the same slots; an IPv6 notice's hop
//!   limit is Forwarding's (one less each time it leaves, <= 1 ends it).

use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicU16, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::mpsc::TrySendError;

use super::{zeroed, Bridged, DropReason, Meta, Pipeline, Verdict};
use crate::packet::ipv6::HDR_LEN as IPV6_HDR_LEN;
use crate::packet::{self, rd128, rd16, rd32, ETHERTYPE_VLAN};
use crate::schema::Reg;
use crate::tables::small::{RerouteClassAction, RerouteWatchAction, SmallTables, WatchAddr};

/// Pipe-local number of Tofino 1's recirculation port: notices from this
/// switch's own egress arrive here; no wire port has this number (< 64).
pub const RECIRC_PORT: u16 = 68;
/// `reroute_notice_h`: kind, flow_class, pad + port, slot, run, queue_delay_ns,
/// hop_switch_id, hop_port.
pub const NOTICE_LEN: usize = 18;
/// The kind of a notice made by this switch's egress (= the mirror header's
/// pkt_type on Tofino, PKT_TYPE_REROUTE_NOTICE).
pub const NOTICE_LOCAL: u8 = 3;
/// The kind of a notice sent to the switch the flow came from.
pub const NOTICE_UPSTREAM: u8 = 4;
/// `pipe.IngressDeparser.reroute` kinds.
pub const MOVED: u8 = 1;
pub const NOTIFIED: u8 = 2;
pub const RELAYED: u8 = 3;
/// `reroute_notice_h.from_int` (the top bit of the pad + port word).
const FROM_INT: u16 = 0x8000;
/// A notice copy is truncated to this (the mirror session's max_pkt_len).
pub const NOTICE_MAX_FRAME: usize = 128;
/// Notices waiting for their ingress pass; more are lost (counted), as
/// mirror copies are when the traffic manager has no room.
pub const NOTICE_QUEUE: usize = 1024;

/// `pipe.IngressDeparser.reroute`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RerouteDigest {
    pub dst_addr: u32,
    pub slot: u16,
    pub kind: u8,
    pub port: u16,
    pub queue_delay_ns: u32,
    pub run: u16,
    pub flow_class: u8,
    /// The trigger was a hop over onset in the packets' INT (the sink's
    /// detection), not the detecting switch's own delay.
    pub from_int: bool,
    /// `from_int`: the hop the sink saw at/over onset, its INT switch id
    /// and egress port (both 0: not named).
    pub hop_switch_id: u32,
    pub hop_port: u16,
}

/// Reroute event counters (exported as metrics).
#[derive(Debug, Default)]
pub struct RerouteStats {
    /// Notices made by detection (the m-th hot packet in a row).
    pub notices: AtomicU64,
    /// Notices lost because the recirculation queue was full.
    pub notices_lost: AtomicU64,
    /// Slots moved to their backup (digest kind MOVED).
    pub moves: AtomicU64,
    /// Notices sent upstream (digest kind NOTIFIED).
    pub upstream_sent: AtomicU64,
    /// Upstream notices passed on upstream (digest kind RELAYED).
    pub relayed: AtomicU64,
    /// Notices dropped without effect: unwatched destination, forged kind,
    /// wrong port, or the slot already on its backup.
    pub refused: AtomicU64,
    /// Reroute digests the control plane did not take in time.
    pub digests_lost: AtomicU64,
}

impl Pipeline {
    /// `reroute.apply` for a packet routed on `dst` (`reroute_watch` or
    /// `reroute_watch6` by its family): the backup next hop when the slot
    /// has moved; marks the packet for detection otherwise.
    #[inline]
    pub(super) fn reroute<A: WatchAddr>(
        &self,
        small: &SmallTables,
        dst: A,
        ingress_port: u16,
        b: &mut Bridged,
    ) -> Option<u16> {
        b.rr_ingress_port = ingress_port;
        match small.reroute_watch_lookup(dst) {
            RerouteWatchAction::Backup {
                slot,
                flow_class,
                backup_nexthop_id,
                ..
            } => {
                b.rr_class = flow_class;
                b.rr_slot = slot;
                let active = self.reroute_regs.active.get(usize::from(slot))?;
                if active.load(Relaxed) == 0 {
                    b.rr_detect = true;
                    None
                } else {
                    Some(backup_nexthop_id)
                }
            }
            RerouteWatchAction::Notify {
                slot, flow_class, ..
            } => {
                b.rr_class = flow_class;
                b.rr_slot = slot;
                b.rr_detect = true;
                // remember_from: where an upstream notice for it goes on
                if let Some(from) = self.reroute_regs.from.get(usize::from(slot)) {
                    from.store(ingress_port, Relaxed);
                }
                None
            }
            RerouteWatchAction::NoAction => None,
        }
    }

    /// `reroute_detect.apply`: the packet of `b` leaves egress `port`
    /// `delay` ticks after it entered (`delay_ticks`, tna.rs); `frame` is
    /// what leaves.
    #[inline]
    pub(super) fn reroute_detect(
        &self,
        b: &Bridged,
        port: u16,
        delay: u64,
        now_ms: u32,
        frame: &[u8],
    ) {
        let small = self.small.load();
        let RerouteClassAction::Thresholds { t_q_ns, m } = small.reroute_class_lookup(b.rr_class)
        else {
            return;
        };
        let regs = &self.reroute_regs;
        let slot = usize::from(b.rr_slot);
        let over = delay > self.tna.ticks_of(t_q_ns);
        // int_onset: the sink's packet, a hop of its stack at/over onset
        let int_hot =
            b.int_sink && b.int_hops > 0 && b.int_ds_flags & super::int_source::FLAG_ONSET != 0;
        if over {
            if let Some(hot) = regs.port_hot.get(usize::from(port)) {
                hot.store(now_ms, Relaxed);
            }
        }
        if over || int_hot {
            if b.rr_detect {
                let Some(cell) = regs.run.get(slot) else {
                    return;
                };
                let run = cell
                    .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |r| {
                        Some(r.saturating_add(1))
                    })
                    .unwrap_or(0)
                    .saturating_add(1);
                if run == m {
                    // name_hop: the hop the stack marks (the sink's notice)
                    let hop = if int_hot { b.int_onset_hop } else { None };
                    self.send_notice(b, run, self.tna.ticks_ns(delay), int_hot, hop, frame);
                }
            }
        } else if b.rr_detect {
            if let Some(cell) = regs.run.get(slot) {
                cell.store(0, Relaxed);
            }
        }
    }

    /// The notice copy and its egress pass: the departing frame's MACs, the
    /// notice, then its IPv4 header onward (a VLAN tag is left out),
    /// truncated to `NOTICE_MAX_FRAME`.
    fn send_notice(
        &self,
        b: &Bridged,
        run: u16,
        delay_ns: u32,
        from_int: bool,
        hop: Option<(u32, u16)>,
        frame: &[u8],
    ) {
        self.rr_stats.notices.fetch_add(1, Relaxed);
        if frame.len() < 14 {
            return;
        }
        let l3 = if rd16(frame, 12) == ETHERTYPE_VLAN {
            18
        } else {
            14
        };
        let ip = frame.get(l3..).unwrap_or(&[]);
        let mut n = Vec::with_capacity(NOTICE_MAX_FRAME);
        n.extend_from_slice(&frame[..12]);
        n.extend_from_slice(&self.notice_ethertype.to_be_bytes());
        n.push(NOTICE_LOCAL);
        n.push(b.rr_class);
        let flag = if from_int { FROM_INT } else { 0 };
        n.extend_from_slice(&(flag | b.rr_ingress_port & 0x1ff).to_be_bytes());
        n.extend_from_slice(&b.rr_slot.to_be_bytes());
        n.extend_from_slice(&run.to_be_bytes());
        n.extend_from_slice(&delay_ns.to_be_bytes());
        let (hop_switch_id, hop_port) = hop.unwrap_or((0, 0));
        n.extend_from_slice(&hop_switch_id.to_be_bytes());
        n.extend_from_slice(&hop_port.to_be_bytes());
        let room = NOTICE_MAX_FRAME - n.len();
        n.extend_from_slice(&ip[..ip.len().min(room)]);
        let mut q = self.notices.lock();
        if q.len() >= NOTICE_QUEUE {
            self.rr_stats.notices_lost.fetch_add(1, Relaxed);
        } else {
            q.push_back(n);
        }
    }

    /// The next notice waiting for its ingress pass (from `RECIRC_PORT`).
    pub fn take_notice(&self) -> Option<Vec<u8>> {
        self.notices.lock().pop_front()
    }

    /// Whether a frame is a congestion notice (`reroute_notice` handles it).
    #[inline]
    pub(super) fn is_notice(&self, frame: &[u8]) -> bool {
        frame.len() >= 14 && rd16(frame, 12) == self.notice_ethertype
    }

    /// Ingress of a congestion notice (the parser's notice state, then
    /// `Forwarding` with `reroute.apply`): see the module comment.
    pub(super) fn reroute_notice(&self, frame: &mut [u8], m: &Meta) -> Verdict {
        const N: usize = 14;
        const L3: usize = N + NOTICE_LEN;
        if frame.len() < L3 + 20 {
            return Verdict::Drop(DropReason::Truncated);
        }
        let ip = &frame[L3..];
        // the parser's select on the version: the flow's IPv4 or IPv6 header
        let (dst, ttl, ihl) = if ip[0] >> 4 == 6 {
            if ip.len() < IPV6_HDR_LEN {
                return Verdict::Drop(DropReason::Truncated);
            }
            if ip[7] <= 1 {
                // Ingress's hop-limit drop comes first, notice or not
                return Verdict::Drop(DropReason::TtlExpired);
            }
            (NoticeDst::V6(rd128(ip, 24)), ip[7], IPV6_HDR_LEN)
        } else {
            let ihl = usize::from(ip[0] & 0x0f) * 4;
            if ip[0] >> 4 != 4 || ihl < 20 {
                return Verdict::Drop(DropReason::BadIpv4);
            }
            if ip.len() < ihl {
                return Verdict::Drop(DropReason::Truncated);
            }
            if packet::fold(packet::ones_sum(&ip[..ihl])) != 0xffff {
                return Verdict::Drop(DropReason::BadIpChecksum);
            }
            (NoticeDst::V4(rd32(ip, 16)), ip[8], ihl)
        };
        let n = &frame[N..L3];
        let (kind, flow_class) = (n[0], n[1]);
        let word = rd16(n, 2);
        let (port, from_int) = (word & 0x1ff, word & FROM_INT != 0);
        let (run, queue_delay_ns) = (rd16(n, 6), rd32(n, 8));
        let (hop_switch_id, hop_port) = (rd32(n, 12), rd16(n, 16));
        let small = self.small.load();
        let local = kind == NOTICE_LOCAL && m.ingress_port & 0x7f == RECIRC_PORT;
        let upstream_by = |primary: u16| kind == NOTICE_UPSTREAM && m.ingress_port == primary;
        let digest = |slot: u16, kind: u8| RerouteDigest {
            // an IPv6 flow is named by its slot (the digest's field is 32 bits)
            dst_addr: match dst {
                NoticeDst::V4(d) => d,
                NoticeDst::V6(_) => 0,
            },
            slot,
            kind,
            port,
            queue_delay_ns,
            run,
            flow_class,
            from_int,
            hop_switch_id,
            hop_port,
        };
        // where a notice that goes on leaves
        let mut out = None;
        let watch = match dst {
            NoticeDst::V4(d) => small.reroute_watch_lookup(d),
            NoticeDst::V6(d) => small.reroute_watch_lookup(d),
        };
        match watch {
            RerouteWatchAction::Backup {
                slot, primary_port, ..
            } if (local && !from_int) || upstream_by(primary_port) => {
                let old = self
                    .reroute_regs
                    .active
                    .get(usize::from(slot))
                    .map_or(1, |a| a.swap(1, Relaxed));
                if old == 0 {
                    self.rr_stats.moves.fetch_add(1, Relaxed);
                    self.reroute_digest(digest(slot, MOVED));
                } else {
                    self.rr_stats.refused.fetch_add(1, Relaxed);
                }
            }
            // no backup here, or seen in INT: a move here would not avoid
            // the hop, the switch the flow came from may
            RerouteWatchAction::Backup { slot, .. } | RerouteWatchAction::Notify { slot, .. }
                if local =>
            {
                frame[N] = NOTICE_UPSTREAM;
                out = Some(port);
                self.rr_stats.upstream_sent.fetch_add(1, Relaxed);
                self.reroute_digest(digest(slot, NOTIFIED));
            }
            RerouteWatchAction::Notify {
                slot, primary_port, ..
            } if upstream_by(primary_port) && (ttl > 1 || matches!(dst, NoticeDst::V6(_))) => {
                // notice_relay: on to where the flow comes in, TTL one less
                let from = self
                    .reroute_regs
                    .from
                    .get(usize::from(slot))
                    .map_or(0, |f| f.load(Relaxed));
                if let NoticeDst::V4(_) = dst {
                    let ip = &mut frame[L3..L3 + ihl];
                    ip[8] = ttl - 1;
                    ip[10..12].fill(0);
                    let c = packet::ipv4_checksum(ip);
                    ip[10..12].copy_from_slice(&c.to_be_bytes());
                }
                out = Some(from & 0x1ff);
                self.rr_stats.relayed.fetch_add(1, Relaxed);
                self.reroute_digest(digest(slot, RELAYED));
            }
            _ => {
                self.rr_stats.refused.fetch_add(1, Relaxed);
            }
        }
        // ipv4_lpm's (ipv6_lpm's) miss drops it too (its default action)
        let route = match dst {
            NoticeDst::V4(d) => small.lpm_lookup(d),
            NoticeDst::V6(d) => small.v6.lpm_lookup(d),
        };
        if !matches!(route, crate::tables::small::LpmAction::SetNexthop(_)) {
            return Verdict::Drop(DropReason::NoRoute);
        }
        let Some(port) = out else {
            return Verdict::Drop(DropReason::RerouteNotice);
        };
        if let NoticeDst::V6(_) = dst {
            // Forwarding's hop_limit_dec, as for any IPv6 packet
            frame[L3 + 7] = ttl - 1;
        }
        if !self.has_port(u32::from(port)) {
            return Verdict::Drop(DropReason::NoSuchPort);
        }
        Verdict::Forward(port)
    }

    fn reroute_digest(&self, d: RerouteDigest) {
        if let Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) =
            self.reroute_digests.try_send(d)
        {
            self.rr_stats.digests_lost.fetch_add(1, Relaxed);
        }
    }
}

/// The destination of the flow's IP header a notice carries, by family.
#[derive(Clone, Copy)]
enum NoticeDst {
    V4(u32),
    V6(u128),
}

/// Congestion reroute state (`pipe.Ingress.reroute_active`,
/// `pipe.Egress.reroute_run` per slot; `pipe.Egress.reroute_port_hot` per
/// egress dev_port).
pub struct RerouteRegs {
    pub active: Vec<AtomicU8>,
    /// `pipe.Ingress.reroute_from`: the dev port a slot's flow came in by.
    pub from: Vec<AtomicU16>,
    pub run: Vec<AtomicU16>,
    pub port_hot: Vec<AtomicU32>,
}

impl RerouteRegs {
    pub fn new(slots: usize, ports: usize) -> RerouteRegs {
        RerouteRegs {
            active: zeroed(slots),
            from: zeroed(slots),
            run: zeroed(slots),
            port_hot: zeroed(ports),
        }
    }

    pub fn read(&self, reg: Reg, i: usize) -> Option<u64> {
        Some(match reg {
            Reg::RerouteActive => self.active.get(i)?.load(Relaxed).into(),
            Reg::RerouteFrom => self.from.get(i)?.load(Relaxed).into(),
            Reg::RerouteRun => self.run.get(i)?.load(Relaxed).into(),
            Reg::ReroutePortHot => self.port_hot.get(i)?.load(Relaxed).into(),
            _ => return None,
        })
    }

    /// Register write (truncated to the register width, as on Tofino).
    pub fn write(&self, reg: Reg, i: usize, v: u64) -> bool {
        match reg {
            Reg::RerouteActive => self.active.get(i).map(|c| c.store(v as u8, Relaxed)),
            Reg::RerouteFrom => self.from.get(i).map(|c| c.store(v as u16, Relaxed)),
            Reg::RerouteRun => self.run.get(i).map(|c| c.store(v as u16, Relaxed)),
            Reg::ReroutePortHot => self.port_hot.get(i).map(|c| c.store(v as u32, Relaxed)),
            _ => None,
        }
        .is_some()
    }

    pub fn clear(&self) {
        self.active.iter().for_each(|c| c.store(0, Relaxed));
        self.from.iter().for_each(|c| c.store(0, Relaxed));
        self.run.iter().for_each(|c| c.store(0, Relaxed));
        self.port_hot.iter().for_each(|c| c.store(0, Relaxed));
    }
}

#[cfg(test)]
mod tests {
    //! Detection after the queue, the recirculated notice, the move to the
    //! backup, the upstream notice and its way on, the sink's INT trigger.
    use std::sync::mpsc::Receiver;

    use super::*;
    /// The notice frame's IPv4 header: after Ethernet and the notice.
    const IP: usize = 14 + NOTICE_LEN;
    use crate::packet::ipv4_checksum;
    use crate::packet::testpkt::Udp4;
    use crate::pipeline::int_source::{FLAG_ONSET, FLAG_ONSET_HOP2};
    use crate::pipeline::tests::{meta, setup, through_queue, watched_in, UAC, UAS};

    const T_Q: u32 = 1_000_000; // 1 ms
    const NOW_MS: u32 = 5000;

    /// UAS (port 2 primary) watched in slot 7, class 1 (t_q, m = 3), backup
    /// next hop 3 (port 3), or, with `notify`, no backup.
    fn watched_with(notify: bool, t_q_ns: u32) -> (Pipeline, Receiver<RerouteDigest>) {
        watched_in(setup().0, UAS, 32, 7, notify, t_q_ns)
    }

    fn watched(notify: bool) -> (Pipeline, Receiver<RerouteDigest>) {
        watched_with(notify, T_Q)
    }

    fn flow() -> Vec<u8> {
        Udp4 {
            src: UAC,
            dst: UAS,
            dport: 5000,
            ..Udp4::default()
        }
        .build()
    }

    /// One packet UAC -> UAS in by `port`, leaving its queue `delay_ns`
    /// after it entered (the egress timestamp minus the ingress one).
    fn send_from(p: &Pipeline, port: u16, delay_ns: u64) -> (Verdict, Vec<u8>) {
        let mut f = flow();
        let m = Meta {
            ingress_port: port,
            ..meta(NOW_MS)
        };
        let v = through_queue(p, &mut f, &m, delay_ns);
        (v, f)
    }

    fn send(p: &Pipeline, delay_ns: u64) -> (Verdict, Vec<u8>) {
        send_from(p, 1, delay_ns)
    }

    fn recirculate(p: &Pipeline) -> Vec<Verdict> {
        let mut out = vec![];
        while let Some(mut n) = p.take_notice() {
            let m = Meta {
                ingress_port: RECIRC_PORT,
                ..meta(2)
            };
            out.push(p.process(&mut n, &m));
        }
        out
    }

    fn from(port: u16) -> Meta {
        Meta {
            ingress_port: port,
            ..meta(3)
        }
    }

    #[test]
    fn m_minus_1_hot_packets_do_not_trigger_and_a_clear_one_resets() {
        let (p, rx) = watched(false);
        for _ in 0..2 {
            send(&p, 2 * u64::from(T_Q));
        }
        send(&p, u64::from(T_Q) / 2); // not over t_q: the run starts again
        for _ in 0..2 {
            send(&p, 5 * u64::from(T_Q));
        }
        assert!(p.take_notice().is_none());
        assert_eq!(p.reroute_regs.run[7].load(Relaxed), 2);
        assert_eq!(send(&p, 5 * u64::from(T_Q)).0, Verdict::Forward(2));
        // the m-th: one notice; the switch's own ingress moves the slot
        assert_eq!(
            recirculate(&p),
            vec![Verdict::Drop(DropReason::RerouteNotice)]
        );
        assert_eq!(p.reroute_regs.active[7].load(Relaxed), 1);
        let d = rx.try_recv().unwrap();
        assert_eq!(
            (d.dst_addr, d.slot, d.kind, d.port, d.run, d.flow_class),
            (UAS, 7, MOVED, 1, 3, 1)
        );
        // the delay in whole 65,536 ns ticks
        assert!(
            d.queue_delay_ns.abs_diff(5 * T_Q) < 1 << 16,
            "{}",
            d.queue_delay_ns
        );
        assert!(!d.from_int);
        // the next packet takes the backup, and is not counted there
        assert_eq!(send(&p, 9 * u64::from(T_Q)).0, Verdict::Forward(3));
        assert!(p.take_notice().is_none());
        // the control plane moves it back
        p.reroute_regs.active[7].store(0, Relaxed);
        assert_eq!(send(&p, 0).0, Verdict::Forward(2));
        assert!(rx.try_recv().is_err());
        // every departure over t_q stamped its port (its egress ms)
        assert_eq!(p.reroute_regs.port_hot[2].load(Relaxed), NOW_MS + 5);
        assert_eq!(p.reroute_regs.port_hot[3].load(Relaxed), NOW_MS + 9);
    }

    #[test]
    fn a_t_q_of_tens_of_ms_is_measured_from_the_timestamps() {
        // 50 ms: far beyond deq_timedelta's 262 us, within the 32-bit delay
        let (p, rx) = watched_with(false, 50_000_000);
        for _ in 0..3 {
            send(&p, 40_000_000);
        }
        assert!(p.take_notice().is_none());
        for _ in 0..3 {
            send(&p, 60_000_000);
        }
        assert_eq!(
            recirculate(&p),
            vec![Verdict::Drop(DropReason::RerouteNotice)]
        );
        let d = rx.try_recv().unwrap().queue_delay_ns;
        assert!(d.abs_diff(60_000_000) < 1 << 16, "{d}");
    }

    #[test]
    fn without_a_backup_the_notice_goes_upstream_by_the_ingress_port() {
        let (p, rx) = watched(true);
        for _ in 0..3 {
            send(&p, 2 * u64::from(T_Q));
        }
        let mut n = p.take_notice().unwrap();
        let m = Meta {
            ingress_port: RECIRC_PORT,
            ..meta(2)
        };
        assert_eq!(p.process(&mut n, &m), Verdict::Forward(1));
        assert_eq!(rd16(&n, 12), 0x88b5);
        assert_eq!(n[14], NOTICE_UPSTREAM);
        assert_eq!(rd32(&n, IP + 16), UAS); // the flow's IPv4 header follows
        assert_eq!(rx.try_recv().unwrap().kind, NOTIFIED);
        assert_eq!(p.reroute_regs.active[7].load(Relaxed), 0);

        // The upstream switch: the same destination watched with a backup,
        // its primary next hop on the port the notice arrives by.
        let (up, up_rx) = watched(false);
        let mut wrong = n.clone();
        assert_eq!(
            up.process(&mut wrong, &from(1)),
            Verdict::Drop(DropReason::RerouteNotice)
        );
        assert_eq!(up.reroute_regs.active[7].load(Relaxed), 0);
        let mut ok = n.clone();
        assert_eq!(
            up.process(&mut ok, &from(2)),
            Verdict::Drop(DropReason::RerouteNotice)
        );
        assert_eq!(up.reroute_regs.active[7].load(Relaxed), 1);
        assert_eq!(up_rx.try_recv().unwrap().kind, MOVED);
        assert_eq!(up.rr_stats.refused.load(Relaxed), 1);
    }

    #[test]
    fn a_notice_crosses_a_switch_without_a_backup_to_the_one_with_it() {
        // the congested switch: no backup, the flow comes in by port 1
        let (sink, _) = watched(true);
        for _ in 0..3 {
            send(&sink, 2 * u64::from(T_Q));
        }
        let mut n = sink.take_notice().unwrap();
        let recirc = Meta {
            ingress_port: RECIRC_PORT,
            ..meta(2)
        };
        assert_eq!(sink.process(&mut n, &recirc), Verdict::Forward(1));
        let ttl = n[IP + 8];

        // the middle switch: no backup either; the flow comes in by port 3
        let (mid, mid_rx) = watched(true);
        assert_eq!(send_from(&mid, 3, 0).0, Verdict::Forward(2));
        assert_eq!(mid.reroute_regs.from[7].load(Relaxed), 3);
        let mut wrong = n.clone();
        assert_eq!(
            mid.process(&mut wrong, &from(1)),
            Verdict::Drop(DropReason::RerouteNotice),
            "only from the primary next hop's port"
        );
        let mut on = n.clone();
        assert_eq!(mid.process(&mut on, &from(2)), Verdict::Forward(3));
        assert_eq!(on[14], NOTICE_UPSTREAM);
        assert_eq!(on[IP + 8], ttl - 1);
        assert_eq!(ipv4_checksum(&on[IP..IP + 20]), rd16(&on, IP + 10));
        let d = mid_rx.try_recv().unwrap();
        assert_eq!((d.kind, d.port, d.slot), (RELAYED, 1, 7));
        assert_eq!(mid.reroute_regs.active[7].load(Relaxed), 0);
        // a notice whose TTL ran out ends
        let mut spent = on.clone();
        spent[IP + 8] = 1;
        let c = ipv4_checksum(&spent[IP..IP + 20]);
        spent[IP + 10..IP + 12].copy_from_slice(&c.to_be_bytes());
        assert_eq!(
            mid.process(&mut spent, &from(2)),
            Verdict::Drop(DropReason::RerouteNotice)
        );

        // the head: a backup; the notice arrives by its primary's port
        let (head, head_rx) = watched(false);
        assert_eq!(
            head.process(&mut on, &from(2)),
            Verdict::Drop(DropReason::RerouteNotice)
        );
        assert_eq!(head.reroute_regs.active[7].load(Relaxed), 1);
        assert_eq!(head_rx.try_recv().unwrap().kind, MOVED);
        assert_eq!(send(&head, 0).0, Verdict::Forward(3));
    }

    #[test]
    fn the_sink_sends_a_hop_over_onset_in_int_upstream_even_with_a_backup() {
        let (p, rx) = watched(false);
        let f = flow();
        let b = |onset: bool| Bridged {
            rr_detect: true,
            rr_class: 1,
            rr_slot: 7,
            rr_ingress_port: 1,
            int_sink: true,
            int_hops: 2,
            int_ds_flags: if onset {
                FLAG_ONSET | FLAG_ONSET_HOP2 | 0x12
            } else {
                0x12
            },
            int_onset_hop: onset.then_some((3, 2)),
            ..Bridged::default()
        };
        // the sink's own delay is under t_q: INT alone makes them hot
        p.reroute_detect(&b(true), 2, 0, NOW_MS, &f);
        p.reroute_detect(&b(false), 2, 0, NOW_MS, &f);
        p.reroute_detect(&b(true), 2, 0, NOW_MS, &f);
        p.reroute_detect(&b(true), 2, 0, NOW_MS, &f);
        assert!(p.take_notice().is_none(), "a clear packet reset the run");
        p.reroute_detect(&b(true), 2, 0, NOW_MS, &f);
        // INT's hot packets never stamp this switch's port
        assert_eq!(p.reroute_regs.port_hot[2].load(Relaxed), 0);
        assert_eq!(recirculate(&p), vec![Verdict::Forward(1)]);
        let d = rx.try_recv().unwrap();
        assert_eq!((d.kind, d.from_int, d.run), (NOTIFIED, true, 3));
        // the notice names the hop the stack marked
        assert_eq!((d.hop_switch_id, d.hop_port), (3, 2));
        assert_eq!(p.reroute_regs.active[7].load(Relaxed), 0);
        // a packet that is not the sink's does not count INT's flags
        let mut transit = b(true);
        transit.int_sink = false;
        for _ in 0..5 {
            p.reroute_detect(&transit, 2, 0, NOW_MS, &f);
        }
        assert!(p.take_notice().is_none());
    }

    #[test]
    fn forged_and_damaged_notices_change_nothing() {
        let (p, rx) = watched(false);
        for _ in 0..3 {
            send(&p, 2 * u64::from(T_Q));
        }
        let n = p.take_notice().unwrap();
        assert_eq!(n[14], NOTICE_LOCAL);
        // a LOCAL notice from a wire port is a forgery
        let mut f = n.clone();
        assert_eq!(
            p.process(&mut f, &meta(2)),
            Verdict::Drop(DropReason::RerouteNotice)
        );
        // damaged IPv4 header, truncated frame, unknown kind
        let mut bad = n.clone();
        bad[IP + 8] ^= 1;
        let m = Meta {
            ingress_port: RECIRC_PORT,
            ..meta(2)
        };
        assert_eq!(
            p.process(&mut bad, &m),
            Verdict::Drop(DropReason::BadIpChecksum)
        );
        let mut short = n[..IP + 14].to_vec();
        assert_eq!(
            p.process(&mut short, &m),
            Verdict::Drop(DropReason::Truncated)
        );
        let mut kind = n.clone();
        kind[14] = 9;
        assert_eq!(
            p.process(&mut kind, &m),
            Verdict::Drop(DropReason::RerouteNotice)
        );
        assert_eq!(p.reroute_regs.active[7].load(Relaxed), 0);
        assert!(rx.try_recv().is_err());
        // m = 0 never triggers
        p.small
            .update(|t| {
                t.reroute_class_write(
                    1,
                    Some(RerouteClassAction::Thresholds { t_q_ns: 0, m: 0 }),
                    false,
                )
            })
            .unwrap();
        for _ in 0..10 {
            send(&p, 1);
        }
        assert!(p.take_notice().is_none());
    }
}
