//! The IPv6 pipeline end to end, frame by frame.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::mpsc::{sync_channel, Receiver};

use super::*;
use crate::packet::ipv6::testpkt::{udp6_checksum, Udp6, V6_RELAY, V6_UAC, V6_UAS};
use crate::packet::ipv6::{parse_at, rd128, IPPROTO_ICMPV6};
use crate::packet::rd16;
use crate::pipeline::tests::{meta, setup};
use crate::schema::{Reg, V6Sizes};
use crate::tables::legs::Rewrite;
use crate::tables::legs6::Rewrite6;
use crate::tables::relay::{Relay6Key, RelayAction};
use crate::tables::small::LpmAction;
use crate::tables::small6::{Relay6AddrAction, Relay6AddrKey};

/// A v6 call: relay6_addr maps V6_RELAY:20000..=29999 to relay_id 3, routes
/// 2001:db8:1::/48 → next hop 1 (port 1), 2001:db8:2::/48 → 2 (port 2),
/// 2001:db8:ff::/48 → 3; the UAC's leg 7 (RTP from 4000 to 20000, RTCP
/// 4001 → 20001, both from port 1) is rewritten to V6_RELAY:20002 →
/// V6_UAS:6000.
pub(crate) fn install_call6(p: &Pipeline) {
    p.small
        .update(|t| {
            t.v6.lpm_write(V6_UAC, 48, Some(LpmAction::SetNexthop(1)), true)?;
            t.v6.lpm_write(V6_UAS, 48, Some(LpmAction::SetNexthop(2)), true)?;
            t.v6.lpm_write(V6_RELAY, 48, Some(LpmAction::SetNexthop(3)), true)?;
            t.v6.relay_addr_write(
                Relay6AddrKey {
                    priority: 1,
                    dst: V6_RELAY,
                    lo: 20000,
                    hi: 29999,
                },
                Some(Relay6AddrAction::MarkRelay6 { relay_id: 3 }),
                true,
            )
        })
        .unwrap();
    for (sport, dport, rtcp) in [(4000, 20000, false), (4001, 20001, true)] {
        let k = Relay6Key {
            src: V6_UAC,
            relay_id: 3,
            sport,
            dport,
            port: 1,
        };
        p.relay6
            .insert(k, RelayAction::Leg { leg: 7, rtcp }, 0, 0)
            .unwrap();
    }
    p.legs6
        .insert(
            7,
            Rewrite6 {
                src: V6_RELAY,
                dst: V6_UAS,
                sport: 20002,
                dport: 6000,
            },
        )
        .unwrap();
}

fn setup6() -> (Pipeline, Receiver<LearnDigest6>) {
    let (p, _) = setup();
    let (tx, rx) = sync_channel(16);
    let p = p.with_v6(
        V6Sizes {
            relay6: 64,
            legs6: 8,
        },
        tx,
    );
    install_call6(&p);
    (p, rx)
}

fn pkt(sport: u16, dport: u16) -> Vec<u8> {
    Udp6 {
        sport,
        dport,
        ..Udp6::default()
    }
    .build()
}

#[test]
fn a_v6_relay_hit_leaves_rewritten_routed_with_macs_hop_limit_and_checksum() {
    let (p, rx) = setup6();
    let mut f = pkt(4000, 20000);
    let (v, b) = p.ingress(&mut f, &meta(10));
    assert_eq!(v, Verdict::Forward(2));
    assert_eq!(&f[0..6], &[2, 0, 0, 0, 0, 0xb]);
    assert_eq!(&f[6..12], &[2, 0, 0, 0, 0, 0xa]);
    let q = parse_at(&f, 14).unwrap();
    assert_eq!((q.src, q.dst, q.hop_limit), (V6_RELAY, V6_UAS, 63));
    let u = q.udp.unwrap();
    assert_eq!((u.src_port, u.dst_port), (20002, 6000));
    assert_eq!(rd16(&f, u.off + 6), udp6_checksum(&f, &q));
    // bridged to egress for the quality registers: the shared leg space
    assert!(b.relayed_rtp && b.leg == 7 && !b.rtcp);
    assert_eq!((b.rtp.seq, b.rtp.timestamp), (5, 1000));
    p.egress_depart(
        &b,
        20_000_000,
        &Departure {
            port: 2,
            queue_delay_ns: 0,
            frame: &f,
        },
    );
    assert_eq!(p.quality.read(Reg::Packets, 7), Some(1));
    assert!(rx.try_recv().is_err(), "a hit raises no digest");
    assert_eq!(p.stats.relay_rewrites.load(Relaxed), 1);
}

#[test]
fn a_miss_to_the_relay_is_forwarded_and_learned_once_per_age() {
    let (p, rx) = setup6();
    let m = Meta {
        ingress_port: 2,
        ..meta(100)
    };
    let mut f = pkt(5555, 20010);
    assert_eq!(p.process(&mut f, &m), Verdict::Forward(3), "to the relay");
    assert_eq!(rd128(&f, 38), V6_RELAY, "unchanged");
    let d = rx.try_recv().unwrap();
    assert_eq!(
        (d.src, d.dst, d.sport, d.dport, d.ingress_port),
        (V6_UAC, V6_RELAY, 5555, 20010, 2)
    );
    assert_eq!(p.process(&mut pkt(5555, 20010), &m), Verdict::Forward(3));
    assert!(rx.try_recv().is_err(), "suppressed by learn_filter6");
    let later = Meta {
        ingress_port: 2,
        ..meta(100 + 2000)
    };
    p.process(&mut pkt(5555, 20010), &later);
    assert!(rx.try_recv().is_ok(), "reported again after the age");
    // the same flow from port 1 is another relay6 key (port binding): from
    // port 2 the call's own flow misses relay6
    let mut f = pkt(4000, 20000);
    assert_eq!(p.process(&mut f, &m), Verdict::Forward(3));
    assert_eq!(rx.try_recv().unwrap().ingress_port, 2);
}

#[test]
fn the_v6_guard_drops_a_foreign_source_and_still_learns() {
    let (p, rx) = setup6();
    p.guard6
        .insert(
            crate::tables::guard::Guard6Key {
                relay_id: 3,
                dport: 20000,
            },
            crate::tables::guard::GuardAction::Drop { leg: 7 },
            0,
            0,
        )
        .unwrap();
    assert_eq!(
        p.process(&mut pkt(4444, 20000), &meta(1)),
        Verdict::Drop(DropReason::Guarded)
    );
    assert_eq!(rx.try_recv().unwrap().sport, 4444);
    assert_eq!(p.guard_drops.read(7), Some(1));
    assert_eq!(
        p.process(&mut pkt(4000, 20000), &meta(1)),
        Verdict::Forward(2)
    );
}

#[test]
fn hop_limit_ndp_and_bad_headers_are_dropped_with_their_reason() {
    let (p, _) = setup6();
    for (hl, v) in [
        (0, Verdict::Drop(DropReason::TtlExpired)),
        (1, Verdict::Drop(DropReason::TtlExpired)),
        (2, Verdict::Forward(2)),
    ] {
        let mut f = Udp6 {
            hop_limit: hl,
            ..Udp6::default()
        }
        .build();
        assert_eq!(p.process(&mut f, &meta(1)), v, "hop limit {hl}");
    }
    let icmp = |ty: u8, dst: u128| {
        let mut f = Udp6 {
            next_header: IPPROTO_ICMPV6,
            dst,
            ..Udp6::default()
        }
        .build();
        f[14 + 40] = ty;
        f
    };
    let to_cpu = Verdict::Drop(DropReason::ToCpu);
    assert_eq!(p.process(&mut icmp(135, V6_UAS), &meta(1)), to_cpu, "NS");
    assert_eq!(p.process(&mut icmp(136, V6_UAS), &meta(1)), to_cpu, "NA");
    let ll = 0xfe80 << 112 | 1;
    assert_eq!(p.process(&mut icmp(128, ll), &meta(1)), to_cpu, "fe80::/10");
    let mc = 0xff02 << 112 | 1;
    assert_eq!(p.process(&mut icmp(143, mc), &meta(1)), to_cpu, "MLDv2");
    // an echo request between hosts is routed
    assert_eq!(
        p.process(&mut icmp(128, V6_UAS), &meta(1)),
        Verdict::Forward(2)
    );
    let mut bad = pkt(4000, 20000);
    bad.truncate(14 + 30);
    assert_eq!(
        p.process(&mut bad, &meta(1)),
        Verdict::Drop(DropReason::BadIpv6)
    );
    // no v6 route
    let mut f = Udp6 {
        dst: 0x2001_0db8_0009 << 80,
        ..Udp6::default()
    }
    .build();
    assert_eq!(
        p.process(&mut f, &meta(1)),
        Verdict::Drop(DropReason::NoRoute)
    );
}

#[test]
fn a_leg_with_a_v4_rewrite_relays_nothing_over_v6() {
    let (p, _) = setup6();
    p.legs6.delete(7).unwrap();
    p.legs
        .insert(
            7,
            Rewrite {
                src: 1,
                dst: 2,
                sport: 3,
                dport: 4,
            },
        )
        .unwrap();
    let mut f = pkt(4000, 20000);
    assert_eq!(
        p.process(&mut f, &meta(1)),
        Verdict::Forward(3),
        "to the relay"
    );
    assert_eq!(rd128(&f, 38), V6_RELAY);
    assert_eq!(p.stats.leg_misses.load(Relaxed), 1);
    assert_eq!(p.legs.counts(7), (0, 0));
}

/// The v6 call of `install_call6` with V6_UAS's /48 watched in
/// `reroute_watch6`: slot 5, class 1 (t_q 1 ms, m = 3); backup next hop 3
/// (port 3), or, with `notify`, no backup. Primary: port 2.
fn watched6(notify: bool) -> (Pipeline, Receiver<super::reroute::RerouteDigest>) {
    crate::pipeline::tests::watched_in(setup6().0, V6_UAS, 48, 5, notify, 1_000_000)
}

/// The relayed v6 RTP packet in by port 1, leaving its queue `delay_ns` late.
fn send6(p: &Pipeline, delay_ns: u64) -> Verdict {
    crate::pipeline::tests::through_queue(p, &mut pkt(4000, 20000), &meta(10), delay_ns)
}

fn recirc() -> Meta {
    Meta {
        ingress_port: super::reroute::RECIRC_PORT,
        ..meta(12)
    }
}

/// The notice frame's IP header: after Ethernet and the notice.
const NOTICE_IP: usize = 14 + super::reroute::NOTICE_LEN;

#[test]
fn a_v6_flow_over_t_q_moves_to_its_backup_by_its_own_notice() {
    let (p, rx) = watched6(false);
    for _ in 0..2 {
        assert_eq!(send6(&p, 2_000_000), Verdict::Forward(2));
    }
    assert!(p.take_notice().is_none(), "m - 1 hot packets");
    send6(&p, 2_000_000);
    let mut n = p.take_notice().unwrap();
    // the notice carries the flow's IPv6 header, rewritten by the relay
    assert_eq!(n[NOTICE_IP] >> 4, 6);
    assert_eq!(rd128(&n, NOTICE_IP + 24), V6_UAS);
    assert_eq!(
        p.process(&mut n, &recirc()),
        Verdict::Drop(DropReason::RerouteNotice)
    );
    assert_eq!(p.reroute_regs.active[5].load(Relaxed), 1);
    let d = rx.try_recv().unwrap();
    // the slot names an IPv6 flow (the digest's address is 32 bits)
    assert_eq!(
        (d.dst_addr, d.slot, d.kind, d.port, d.run),
        (0, 5, super::reroute::MOVED, 1, 3)
    );
    // the next packet takes the backup, and the control plane moves it back
    assert_eq!(send6(&p, 9_000_000), Verdict::Forward(3));
    assert!(p.take_notice().is_none(), "not counted on the backup");
    p.reroute_regs.active[5].store(0, Relaxed);
    assert_eq!(send6(&p, 0), Verdict::Forward(2));
}

#[test]
fn a_v6_notice_goes_upstream_and_on_with_its_hop_limit_one_less() {
    use super::reroute::{NOTICE_UPSTREAM, RELAYED};
    // the congested switch: no backup, the flow came in by port 1
    let (sink, _) = watched6(true);
    for _ in 0..3 {
        send6(&sink, 2_000_000);
    }
    let mut n = sink.take_notice().unwrap();
    assert_eq!(sink.process(&mut n, &recirc()), Verdict::Forward(1));
    assert_eq!(n[14], NOTICE_UPSTREAM);
    // the relayed packet left with 63; the notice leaves with one less
    let hop_limit = n[NOTICE_IP + 7];
    assert_eq!(hop_limit, 62);

    // the next switch: no backup either; the flow comes in there by port 1 too
    let (mid, mid_rx) = watched6(true);
    send6(&mid, 0);
    let from = |port: u16| Meta {
        ingress_port: port,
        ..meta(13)
    };
    let mut wrong = n.clone();
    assert_eq!(
        mid.process(&mut wrong, &from(3)),
        Verdict::Drop(DropReason::RerouteNotice),
        "only from the primary next hop's port"
    );
    let mut on = n.clone();
    assert_eq!(mid.process(&mut on, &from(2)), Verdict::Forward(1));
    assert_eq!(on[NOTICE_IP + 7], hop_limit - 1);
    let d = mid_rx.try_recv().unwrap();
    assert_eq!((d.kind, d.slot), (RELAYED, 5));
    // a notice whose hop limit ran out ends
    on[NOTICE_IP + 7] = 1;
    assert_eq!(
        mid.process(&mut on, &from(2)),
        Verdict::Drop(DropReason::TtlExpired)
    );
    // and the switch with a backup moves its slot on it
    let (up, up_rx) = watched6(false);
    let mut last = n.clone();
    assert_eq!(
        up.process(&mut last, &from(2)),
        Verdict::Drop(DropReason::RerouteNotice)
    );
    assert_eq!(up.reroute_regs.active[5].load(Relaxed), 1);
    assert_eq!(up_rx.try_recv().unwrap().kind, super::reroute::MOVED);
    assert!(mid_rx.try_recv().is_err());
}

#[test]
fn an_unwatched_v6_destination_and_a_truncated_v6_notice_are_refused() {
    let (p, _) = watched6(false);
    // an IPv4 watch entry does not watch IPv6 packets, nor the other way round
    assert_eq!(send6(&p, 0), Verdict::Forward(2));
    p.small
        .update(|t| t.reroute_watch_write(V6_UAS, 48, None, false))
        .unwrap();
    for _ in 0..5 {
        send6(&p, 5_000_000);
    }
    assert!(p.take_notice().is_none(), "unwatched: no detection");
    let (q, _) = watched6(false);
    for _ in 0..3 {
        send6(&q, 2_000_000);
    }
    let n = q.take_notice().unwrap();
    let mut short = n[..NOTICE_IP + 30].to_vec();
    assert_eq!(
        q.process(&mut short, &recirc()),
        Verdict::Drop(DropReason::Truncated)
    );
    assert_eq!(q.reroute_regs.active[5].load(Relaxed), 0);
}
