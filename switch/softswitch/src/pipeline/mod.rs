//! One packet through the p4relay pipeline, in the P4 program's order; each
//! control file of switch/p4/controls/ has its module here under the same
//! name (tests/architecture.rs checks it), holding the step and its
//! registers: `ingress` (ingress.p4's `Ingress.apply` after the parser's
//! `port_binding`, calling `relay_sessions`, `learn_filter`, `forwarding`,
//! `reroute`, `ired`'s drop and `int_source`, then the deparser), `egress`
//! (egress.p4: `int_sink` / `int_transit` and `ired` as the packet leaves
//! its FIFO, where they rewrite the frame in its queue slot; `rtp_quality`
//! with `rtp_clock`'s time bases and `reroute`'s detection as it departs,
//! from what ingress bridged with it, `Bridged`). The tables are the
//! control plane's (crate::tables); mirror.rs keeps the XDP fast path's
//! maps (`FastPathMaps`) in step with them.

use std::sync::atomic::AtomicU64;
use std::sync::mpsc::SyncSender;
use std::sync::Arc;

mod egress;
mod forwarding;
mod ingress;
pub mod int_sink;
pub mod int_source;
pub mod int_transit;
pub mod ired;
mod learn_filter;
pub mod mirror;
pub mod port_binding;
mod relay6_sessions;
mod relay_sessions;
pub mod reroute;
mod rtp_clock;
mod rtp_quality;
pub mod tna;

pub use learn_filter::LearnFilter;
pub use mirror::{FastPathMaps, Touched};
pub use reroute::{RerouteDigest, RerouteRegs, RerouteStats};
pub use rtp_quality::QualityRegs;

use crate::contract::Contract;
use crate::packet::{self, ParseError, Rtp};
use crate::schema::V6Sizes;
use crate::tables::counter::PacketCounter;
use crate::tables::guard::{Guard6Table, GuardTable};
use crate::tables::legs::LegTable;
use crate::tables::legs6::Leg6Table;
use crate::tables::relay::{Relay6Table, RelayKey, RelayTable};
use crate::tables::small::SmallStore;

/// `n` registers at zero.
fn zeroed<T: Default>(n: usize) -> Vec<T> {
    let mut v = Vec::with_capacity(n);
    v.resize_with(n, T::default);
    v
}

/// `pipe.IngressDeparser.learn`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LearnDigest {
    pub src: u32,
    pub dst: u32,
    pub sport: u16,
    pub dport: u16,
    pub ingress_port: u16,
}

/// `pipe.IngressDeparser.learn6`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LearnDigest6 {
    pub src: u128,
    pub dst: u128,
    pub sport: u16,
    pub dport: u16,
    pub ingress_port: u16,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropReason {
    Truncated,
    NotIpv4,
    BadIpv4,
    BadIpChecksum,
    BadIpv6,
    /// ipv4_lpm or nexthop chose `drop` (incl. their default actions).
    NoRoute,
    TtlExpired,
    /// nexthop names a port the switch does not have.
    NoSuchPort,
    /// relay_guard hit: a foreign source to an offloaded call's relay port.
    Guarded,
    /// A congestion notice ends here (used, or refused: reroute.rs).
    RerouteNotice,
    /// iRED: the egress port's drop flag was set (IredDrop).
    Ired,
    /// INT marker with a malformed INT stack (IntCheck, `int_malformed`).
    IntMalformed,
    /// ICMPv6 the P4 program sends to the CPU port (NDP, or to a multicast
    /// or link-local destination): this switch has no CPU port.
    ToCpu,
}

impl DropReason {
    pub const ALL: [DropReason; 13] = [
        DropReason::Truncated,
        DropReason::NotIpv4,
        DropReason::BadIpv4,
        DropReason::BadIpChecksum,
        DropReason::BadIpv6,
        DropReason::NoRoute,
        DropReason::TtlExpired,
        DropReason::NoSuchPort,
        DropReason::Guarded,
        DropReason::RerouteNotice,
        DropReason::Ired,
        DropReason::IntMalformed,
        DropReason::ToCpu,
    ];
    pub fn name(self) -> &'static str {
        match self {
            DropReason::Truncated => "truncated",
            DropReason::NotIpv4 => "not_ipv4",
            DropReason::BadIpv4 => "bad_ipv4",
            DropReason::BadIpChecksum => "bad_ip_checksum",
            DropReason::NoRoute => "no_route",
            DropReason::TtlExpired => "ttl_expired",
            DropReason::NoSuchPort => "no_such_port",
            DropReason::Guarded => "relay_guard",
            DropReason::RerouteNotice => "reroute_notice",
            DropReason::Ired => "ired",
            DropReason::IntMalformed => "int_malformed",
            DropReason::ToCpu => "to_cpu",
            DropReason::BadIpv6 => "bad_ipv6",
        }
    }
    pub fn index(self) -> usize {
        self as usize
    }
}

impl From<ParseError> for DropReason {
    fn from(e: ParseError) -> Self {
        match e {
            ParseError::Truncated => DropReason::Truncated,
            ParseError::NotIpv4 => DropReason::NotIpv4,
            ParseError::BadIpv4 => DropReason::BadIpv4,
            ParseError::BadIpChecksum => DropReason::BadIpChecksum,
            ParseError::BadIpv6 => DropReason::BadIpv6,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Forward(u16),
    Drop(DropReason),
}

/// Pipeline-wide event counters (exported as metrics).
#[derive(Debug, Default)]
pub struct PipelineStats {
    pub relay_hits: AtomicU64,
    pub relay_rewrites: AtomicU64,
    /// relay hit but its leg has no leg_rewrite entry: forwarded unchanged.
    pub leg_misses: AtomicU64,
    pub learn_digests: AtomicU64,
    pub learn_suppressed: AtomicU64,
    /// Digest queue full (control plane not keeping up): the flow reports again after the filter ages.
    pub learn_dropped: AtomicU64,
    /// relay_guard hits (dropped; also counted per leg in guard_drops).
    pub guard_drops: AtomicU64,
    pub rtp_packets: AtomicU64,
    pub fragments: AtomicU64,
    /// UDP whose length field disagrees with IPv4: routed, not relayed.
    pub udp_bad_length: AtomicU64,
    /// IPv6 UDP without a checksum (invalid, RFC 8200): routed, never relayed.
    pub udp6_zero_checksum: AtomicU64,
}

pub struct Pipeline {
    pub small: SmallStore,
    pub relay: RelayTable,
    pub guard: GuardTable,
    pub legs: LegTable,
    /// `pipe.Ingress.relay6`, `relay_guard6`, `leg_rewrite6` (relay6_sessions.rs).
    pub relay6: Relay6Table,
    pub guard6: Guard6Table,
    pub legs6: Leg6Table,
    /// `pipe.Ingress.learn_filter6`: the IPv6 flows' digest suppression.
    pub learn_filter6: LearnFilter,
    /// `pipe.Ingress.guard_drops`: foreign packets dropped, by the guard's leg.
    pub guard_drops: PacketCounter,
    pub quality: QualityRegs,
    pub learn_filter: LearnFilter,
    pub reroute_regs: RerouteRegs,
    pub ired: ired::IredRegs,
    pub int: int_source::IntRegs,
    /// `pipe.IngressParser.$PORT_METADATA` (port_binding.rs).
    pub port_binding: port_binding::PortBinding,
    pub stats: PipelineStats,
    pub rr_stats: RerouteStats,
    /// What Egress reads of the traffic manager, at TNA's widths.
    pub tna: tna::Tna,
    digests: SyncSender<LearnDigest>,
    digests6: SyncSender<LearnDigest6>,
    reroute_digests: SyncSender<RerouteDigest>,
    /// Notice copies waiting for their ingress pass (reroute.rs).
    notices: parking_lot::Mutex<std::collections::VecDeque<Vec<u8>>>,
    notice_ethertype: u16,
    /// dev_port → egress exists (bitmap over contract max_ports).
    ports: u64,
    /// The XDP fast path, when attached: relay hits it forwards never reach
    /// `ingress`; what they count is added on reads (mirror.rs).
    pub fastpath: Option<Arc<dyn FastPathMaps>>,
}

/// Carried with a forwarded packet from ingress through its egress queue to
/// `egress_depart` (Tofino: bridged metadata).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Bridged {
    /// Relayed by a relay entry whose leg has a rewrite, RTP v2 header parsed.
    pub relayed_rtp: bool,
    pub leg: u32,
    /// The relay entry's rtcp bit: RTCP never touches the quality registers.
    pub rtcp: bool,
    pub rtp: Rtp,
    /// Reroute (reroute.rs): a watched flow on its primary next hop, counted
    /// by detection; its flow class, slot, and the port it came in on.
    pub rr_detect: bool,
    pub rr_class: u8,
    pub rr_slot: u16,
    pub rr_ingress_port: u16,
    /// `ingress_mac_tstamp` (48 bits, ns): reroute's delay at egress.
    pub rr_ingress_ts: u64,
    /// INT roles Ingress chose (int_bridged_h): insert INT (source), add
    /// this switch's hop (transit), strip (sink); the port the packet came
    /// in on (the hop's ingress port).
    pub int_source: bool,
    pub int_transit: bool,
    pub int_sink: bool,
    pub int_ingress_port: u16,
    /// Offset of the INT shim (of where the source inserts it), and the
    /// hops the packet brought (0: no INT).
    pub int_shim: u16,
    pub int_hops: u8,
    /// The MD header's ds_flags the packet brought (the sink's detection
    /// reads the onset bit).
    pub int_ds_flags: u16,
    /// The hop the stack marks at/over onset (switch id, egress port): the
    /// sink's reroute notice names it.
    pub int_onset_hop: Option<(u32, u16)>,
    /// The packet is IPv6 (its UDP checksum stays valid with INT on board).
    pub int_v6: bool,
    /// The sink's report copy (int_report_mirror_h).
    pub int_report: Option<int_source::IntReportCopy>,
}

/// A packet at the head of its egress queue, before it leaves: what
/// Egress sees of the queue, and its frame in the queue slot, which Egress
/// may rewrite (INT changes its length; `buf` has room up to the slot size).
#[derive(Debug)]
pub struct EgressPass<'a> {
    /// Cells queued behind the packet (deq_qdepth).
    pub deq_cells: u32,
    /// Cells queued ahead of it when it arrived (enq_qdepth).
    pub enq_cells: u32,
    /// Time in the queue, ns (deq_timedelta).
    pub queue_delay_ns: u64,
    // `egress_head` clamps the three to TNA's widths (tna.rs) first.
    pub buf: &'a mut [u8],
    /// Frame length in `buf`.
    pub len: usize,
}

/// What Egress does with the packet at the head of the queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EgressVerdict {
    /// It leaves by the port.
    Send,
    /// Dropped at egress (counted as an egress drop; it still departs for
    /// the quality registers).
    Drop,
    /// A copy that ends here (a suppressed telemetry report copy).
    Consume,
}

/// How a packet leaves its egress queue (`egress_depart`).
#[derive(Debug, Clone, Copy, Default)]
pub struct Departure<'a> {
    pub port: u16,
    /// Time in the queue, ns (the I/O layer's measure; reroute's detection
    /// uses the timestamps instead, as the P4 program does).
    pub queue_delay_ns: u64,
    pub frame: &'a [u8],
}

/// Per-packet metadata the I/O layer provides.
#[derive(Debug, Clone, Copy)]
pub struct Meta {
    pub ingress_port: u16,
    /// Arrival, ns since the Unix epoch (kernel RX timestamp).
    pub now_ns: u64,
    /// Arrival, ms since the Unix epoch, mod 2^32 (idle timers, last_seen).
    pub now_ms: u32,
}

impl Pipeline {
    pub fn new(
        c: &Contract,
        relay_entries: usize,
        legs: usize,
        ports: &[u32],
        digests: SyncSender<LearnDigest>,
    ) -> Pipeline {
        Pipeline {
            small: SmallStore::default(),
            relay: RelayTable::new(relay_entries),
            guard: GuardTable::new(relay_entries),
            legs: LegTable::new(legs),
            // Until `with_v6`: a few entries.
            relay6: Relay6Table::new(16),
            guard6: Guard6Table::new(16),
            legs6: Leg6Table::new(legs, 16),
            learn_filter6: LearnFilter::new(
                c.config.learn_filter_size as usize,
                c.config.learn_filter_age_ms,
            ),
            guard_drops: PacketCounter::new(legs),
            quality: QualityRegs::new(legs, c.config.rtp_clock_hz, c.config.jitter_shift),
            learn_filter: LearnFilter::new(
                c.config.learn_filter_size as usize,
                c.config.learn_filter_age_ms,
            ),
            reroute_regs: RerouteRegs::new(
                c.config.reroute_slots as usize,
                c.registers
                    .iter()
                    .find(|r| r.name.ends_with(".reroute_port_hot"))
                    .map_or(512, |r| r.size_p4 as usize),
            ),
            ired: ired::IredRegs::default(),
            int: int_source::IntRegs::default(),
            port_binding: port_binding::PortBinding::new(c.config.unbound_port),
            stats: PipelineStats::default(),
            rr_stats: RerouteStats::default(),
            tna: tna::Tna::new(&c.config),
            digests,
            // Until `with_v6`: digests are counted as lost.
            digests6: std::sync::mpsc::sync_channel(0).0,
            // Until `with_reroute_digests`: digests are counted as lost.
            reroute_digests: std::sync::mpsc::sync_channel(0).0,
            notices: Default::default(),
            notice_ethertype: c.config.reroute_notice_ethertype,
            ports: ports
                .iter()
                .filter(|&&p| p < u32::from(port_binding::PORTS))
                .fold(0, |m, &p| m | 1 << p),
            fastpath: None,
        }
    }

    /// Shares the quality registers and the relay work with an XDP fast path.
    pub fn with_fastpath(mut self, c: &Contract, fp: Arc<dyn FastPathMaps>) -> Pipeline {
        self.quality =
            QualityRegs::shared(fp.quality(), c.config.rtp_clock_hz, c.config.jitter_shift)
                .with_half_bits(self.quality.half_bits());
        self.fastpath = Some(fp);
        self
    }

    /// Where `pipe.IngressDeparser.reroute` digests go.
    /// The pipeline averaging `sample` in iRED (the P4 program's build option).
    pub fn with_ired_sample(mut self, sample: ired::IredSample) -> Pipeline {
        self.ired = ired::IredRegs::with_sample(sample);
        self
    }

    /// The IPv6 relay tables at their sizes, and where
    /// `pipe.IngressDeparser.learn6` digests go.
    pub fn with_v6(mut self, sizes: V6Sizes, tx: SyncSender<LearnDigest6>) -> Pipeline {
        self.relay6 = Relay6Table::new(sizes.relay6 as usize);
        self.guard6 = Guard6Table::new(sizes.relay6 as usize);
        self.legs6 = Leg6Table::new(self.legs.capacity(), sizes.legs6 as usize);
        self.digests6 = tx;
        self
    }

    /// The quality registers addressed as two halves (`--quality-half-bits`).
    pub fn with_quality_half_bits(mut self, half_bits: Option<u32>) -> Pipeline {
        self.quality = self.quality.with_half_bits(half_bits);
        self
    }

    pub fn with_reroute_digests(mut self, tx: SyncSender<RerouteDigest>) -> Pipeline {
        self.reroute_digests = tx;
        self
    }

    pub fn has_port(&self, port: u32) -> bool {
        port < u32::from(port_binding::PORTS) && self.ports & (1 << port) != 0
    }

    /// Clears every table and register (SetForwardingPipelineConfig).
    pub fn clear(&self) {
        let _ = self.small.update(|t| {
            *t = Default::default();
            Ok(())
        });
        self.relay.clear();
        self.guard.clear();
        self.legs.clear();
        self.relay6.clear();
        self.guard6.clear();
        self.legs6.clear();
        self.quality.clear();
        self.learn_filter.clear();
        self.learn_filter6.clear();
        self.reroute_regs.clear();
        self.notices.lock().clear();
        self.ired.clear();
        self.int.clear();
        self.port_binding.clear();
        self.mirror_cleared();
    }
}

/// `ingress_metadata_t`: what the ingress controls tell each other, over
/// either family's relay key `K` and address `A` (IPv6's: IngressMeta6,
/// relay6_sessions.rs).
#[derive(Debug, Clone, Copy)]
struct IngressMetaOf<K, A> {
    /// The UDP 4-tuple and the bound port (relay's key, the learn filter's flow).
    flow: K,
    /// The destination as it arrived (the learn digest's dst_addr).
    dst: A,
    /// The port the packet arrived on (the learn digest's).
    ingress_port: u16,
    /// relay_addr: the destination is a relay (RTPProxy) address and port.
    relay_dst: bool,
    /// relay: hit with `relay_leg`.
    relay_hit: bool,
    leg: u32,
    rtcp: bool,
    /// leg_rewrite rewrote the packet.
    rewritten: bool,
    /// relay_guard: a foreign source to a guarded relay port.
    guard_drop: bool,
    /// The destination forwarding routes on (the rewritten one after a relay).
    dst_addr: A,
}

impl<K, A: Copy> IngressMetaOf<K, A> {
    fn with_flow(flow: K, dst: A, ingress_port: u16) -> Self {
        IngressMetaOf {
            flow,
            dst,
            ingress_port,
            relay_dst: false,
            relay_hit: false,
            leg: 0,
            rtcp: false,
            rewritten: false,
            guard_drop: false,
            dst_addr: dst,
        }
    }
}

/// The IPv4 packet's.
type IngressMeta = IngressMetaOf<RelayKey, u32>;

impl IngressMeta {
    fn new(p: &packet::Parsed, ingress_port: u16, bound_port: u16) -> IngressMeta {
        let (sport, dport) = p.udp.map_or((0, 0), |u| (u.src_port, u.dst_port));
        let flow = RelayKey {
            src: p.src,
            dst: p.dst,
            sport,
            dport,
            port: bound_port,
        };
        IngressMeta::with_flow(flow, p.dst, ingress_port)
    }
}

#[cfg(test)]
mod int_tests;
#[cfg(test)]
pub(crate) mod tests;
#[cfg(test)]
pub(crate) mod tests6;
