//! The pipeline end to end, frame by frame.

use std::sync::atomic::Ordering::Relaxed;

use super::*;
use crate::contract::CONTRACT;
use crate::packet::testpkt::{rtp, udp_checksum, Udp4};
use crate::packet::{parse, rd16, rd32};
use crate::schema::Reg;
use crate::tables::guard::{GuardAction, GuardKey};
use crate::tables::legs::Rewrite;
use crate::tables::relay::RelayAction;
use crate::tables::small::RelayAddrKey;
use crate::tables::small::{LpmAction, NexthopAction, RelayAddrAction};
use std::sync::mpsc::{sync_channel, Receiver};

pub(crate) const UAC: u32 = 0xc612_010a; // 198.18.1.10
pub(crate) const UAS: u32 = 0xc612_020a; // 198.18.2.10
pub(crate) const RELAY: u32 = 0xc612_000a; // 198.18.0.10
const MAC_A: [u8; 6] = [2, 0, 0, 0, 0, 0xa];
const MAC_B: [u8; 6] = [2, 0, 0, 0, 0, 0xb];

/// `f` through ingress and, if forwarded, out of its queue `delay_ns` after
/// it entered (the egress timestamp minus the ingress one).
pub(crate) fn through_queue(p: &Pipeline, f: &mut Vec<u8>, m: &Meta, delay_ns: u64) -> Verdict {
    let (v, b) = p.ingress(f, m);
    if let Verdict::Forward(port) = v {
        let d = Departure {
            port,
            queue_delay_ns: delay_ns,
            frame: f,
        };
        p.egress_depart(&b, m.now_ns + delay_ns, &d);
    }
    v
}

/// `p` reporting reroute digests, with `dst`/`len` watched in `slot`, class 1
/// (`t_q_ns`, m = 3); primary port 2, backup next hop 3 (port 3), or, with
/// `notify`, no backup (an upstream notice instead).
pub(crate) fn watched_in<A: crate::tables::small::WatchAddr>(
    p: Pipeline,
    dst: A,
    len: u8,
    slot: u16,
    notify: bool,
    t_q_ns: u32,
) -> (Pipeline, Receiver<super::reroute::RerouteDigest>) {
    use crate::tables::small::{RerouteClassAction, RerouteWatchAction};
    let (tx, rx) = sync_channel(16);
    let p = p.with_reroute_digests(tx);
    let a = if notify {
        RerouteWatchAction::Notify {
            slot,
            flow_class: 1,
            primary_port: 2,
        }
    } else {
        RerouteWatchAction::Backup {
            slot,
            flow_class: 1,
            backup_nexthop_id: 3,
            primary_port: 2,
        }
    };
    p.small
        .update(|t| {
            t.reroute_watch_write(dst, len, Some(a), true)?;
            t.reroute_class_write(
                1,
                Some(RerouteClassAction::Thresholds { t_q_ns, m: 3 }),
                true,
            )
        })
        .unwrap();
    (p, rx)
}

pub(crate) fn setup() -> (Pipeline, Receiver<LearnDigest>) {
    let (tx, rx) = sync_channel(16);
    let p = Pipeline::new(&CONTRACT, 1000, 100, &[1, 2, 3], tx);
    p.small
        .update(|t| {
            t.lpm_write(0xc612_0100, 24, Some(LpmAction::SetNexthop(1)), true)?;
            t.lpm_write(0xc612_0200, 24, Some(LpmAction::SetNexthop(2)), true)?;
            t.lpm_write(0xc612_0000, 24, Some(LpmAction::SetNexthop(3)), true)?;
            t.lpm_write(0x0a00_0000, 8, Some(LpmAction::SetNexthop(9)), true)?;
            t.nexthop_write(
                1,
                Some(NexthopAction::Forward {
                    port: 1,
                    src_mac: MAC_A,
                    dst_mac: MAC_B,
                }),
                true,
            )?;
            t.nexthop_write(
                2,
                Some(NexthopAction::Forward {
                    port: 2,
                    src_mac: MAC_A,
                    dst_mac: MAC_B,
                }),
                true,
            )?;
            t.nexthop_write(
                3,
                Some(NexthopAction::Forward {
                    port: 3,
                    src_mac: MAC_A,
                    dst_mac: MAC_B,
                }),
                true,
            )?;
            t.nexthop_write(
                9,
                Some(NexthopAction::Forward {
                    port: 40,
                    src_mac: MAC_A,
                    dst_mac: MAC_B,
                }),
                true,
            )?;
            t.relay_addr_write(
                RelayAddrKey {
                    priority: 1,
                    dst: RELAY,
                    lo: 20000,
                    hi: 29999,
                },
                Some(RelayAddrAction::MarkRelay),
                true,
            )
        })
        .unwrap();
    (p, rx)
}

pub(crate) fn meta(ms: u32) -> Meta {
    Meta {
        ingress_port: 1,
        now_ns: u64::from(ms) * 1_000_000,
        now_ms: ms,
    }
}

#[test]
fn routes_with_mac_rewrite_ttl_and_checksum() {
    let (p, _) = setup();
    let mut f = Udp4 {
        src: UAC,
        dst: UAS,
        dport: 5000,
        ..Udp4::default()
    }
    .build();
    assert_eq!(p.process(&mut f, &meta(1)), Verdict::Forward(2));
    assert_eq!(&f[0..6], &MAC_B);
    assert_eq!(&f[6..12], &MAC_A);
    let q = parse(&f).unwrap(); // parse verifies the IPv4 checksum
    assert_eq!(q.ttl, 63);
    let mut ttl1 = Udp4 {
        dst: UAS,
        ttl: 1,
        ..Udp4::default()
    }
    .build();
    assert_eq!(
        p.process(&mut ttl1, &meta(1)),
        Verdict::Drop(DropReason::TtlExpired)
    );
    let mut ttl0 = Udp4 {
        dst: UAS,
        ttl: 0,
        ..Udp4::default()
    }
    .build();
    assert_eq!(
        p.process(&mut ttl0, &meta(1)),
        Verdict::Drop(DropReason::TtlExpired)
    );
    let mut nr = Udp4 {
        dst: 0x0b00_0001,
        ..Udp4::default()
    }
    .build();
    assert_eq!(
        p.process(&mut nr, &meta(1)),
        Verdict::Drop(DropReason::NoRoute)
    );
    let mut np = Udp4 {
        dst: 0x0a00_0001,
        ..Udp4::default()
    }
    .build();
    assert_eq!(
        p.process(&mut np, &meta(1)),
        Verdict::Drop(DropReason::NoSuchPort)
    );
    // default route
    p.small
        .update(|t| t.lpm_write(0, 0, Some(LpmAction::SetNexthop(1)), true))
        .unwrap();
    let mut d = Udp4 {
        dst: 0x0b00_0001,
        ..Udp4::default()
    }
    .build();
    assert_eq!(p.process(&mut d, &meta(1)), Verdict::Forward(1));
}

/// Ingress, then departure from the egress queue right away.
fn through(p: &Pipeline, f: &mut [u8], m: &Meta) -> Verdict {
    let (v, b) = p.ingress(f, m);
    if matches!(v, Verdict::Forward(_)) {
        p.egress_depart(&b, m.now_ns, &Default::default());
    }
    v
}

pub(crate) fn install_call(p: &Pipeline) {
    // UAC 198.18.1.10:4000 → relay :20000 becomes relay:20002 → UAS:6000 (leg 7)
    p.legs
        .insert(
            7,
            Rewrite {
                src: RELAY,
                dst: UAS,
                sport: 20002,
                dport: 6000,
            },
        )
        .unwrap();
    p.relay
        .insert(
            RelayKey {
                src: UAC,
                dst: RELAY,
                sport: 4000,
                dport: 20000,
                port: 1,
            },
            RelayAction::Leg {
                leg: 7,
                rtcp: false,
            },
            0,
            0,
        )
        .unwrap();
    p.relay
        .insert(
            RelayKey {
                src: UAC,
                dst: RELAY,
                sport: 4001,
                dport: 20001,
                port: 1,
            },
            RelayAction::Leg { leg: 7, rtcp: true },
            0,
            0,
        )
        .unwrap();
}

#[test]
fn relays_rtp_and_rtcp_with_valid_checksums() {
    let (p, rx) = setup();
    install_call(&p);
    for csum in [true, false] {
        let mut f = Udp4 {
            src: UAC,
            dst: RELAY,
            sport: 4000,
            dport: 20000,
            udp_csum: csum,
            options: vec![1, 1, 1, 0],
            ..Udp4::default()
        }
        .build();
        assert_eq!(through(&p, &mut f, &meta(5)), Verdict::Forward(2));
        let q = parse(&f).unwrap();
        let u = q.udp.unwrap();
        assert_eq!(
            (q.src, q.dst, u.src_port, u.dst_port),
            (RELAY, UAS, 20002, 6000)
        );
        let c = rd16(&f, u.off + 6);
        if csum {
            assert_eq!(c, udp_checksum(&f, &q));
        } else {
            assert_eq!(c, 0, "zero UDP checksum stays zero");
        }
    }
    let mut rtcp = Udp4 {
        src: UAC,
        dst: RELAY,
        sport: 4001,
        dport: 20001,
        payload: vec![0x81, 200, 0, 6, 1, 2, 3, 4],
        ..Udp4::default()
    }
    .build();
    assert_eq!(through(&p, &mut rtcp, &meta(6)), Verdict::Forward(2));
    let q = parse(&rtcp).unwrap();
    let u = q.udp.unwrap();
    assert_eq!((u.src_port, u.dst_port), (20003, 6001));
    assert_eq!(rd16(&rtcp, u.off + 6), udp_checksum(&rtcp, &q));
    assert_eq!(rd32(&rtcp, q.l3 + 12), RELAY);
    // RTCP does not touch quality registers; the two RTP packets did.
    assert_eq!(p.quality.read(Reg::Packets, 7), Some(2));
    // The leg counts its packets, RTP and RTCP alike (leg_rewrite's direct
    // counter); the relay entries have no counters.
    assert_eq!(p.legs.counts(7).0, 3);
    assert_eq!(p.legs.counts(8), (0, 0));
    assert!(rx.try_recv().is_err(), "hits raise no digest");
}

#[test]
fn quality_is_measured_at_egress_departure() {
    let (p, _) = setup();
    install_call(&p);
    let rtp_frame = |seq: u16| {
        Udp4 {
            src: UAC,
            dst: RELAY,
            sport: 4000,
            dport: 20000,
            payload: rtp(8, seq, u32::from(seq) * 160, 160),
            ..Udp4::default()
        }
        .build()
    };
    // Ingress alone measures nothing: the packet has not left yet.
    let (v, b) = p.ingress(&mut rtp_frame(1), &meta(0));
    assert_eq!(v, Verdict::Forward(2));
    assert!(b.relayed_rtp && !b.rtcp && b.leg == 7 && b.rtp.seq == 1);
    assert_eq!(p.quality.read(Reg::Packets, 7), Some(0));
    // 10 packets sent every 20 ms; 3, 4 and 7 are tail-dropped by the
    // queue, the others leave after a queueing delay that varies 0/5 ms.
    let t0 = 1_700_000_000_000_000_000u64;
    for seq in 0..10u16 {
        let sent = t0 + u64::from(seq) * 20_000_000;
        let m = Meta {
            ingress_port: 1,
            now_ns: sent,
            now_ms: (sent / 1_000_000) as u32,
        };
        let (v, b) = p.ingress(&mut rtp_frame(seq), &m);
        assert_eq!(v, Verdict::Forward(2));
        if [3, 4, 7].contains(&seq) {
            continue;
        }
        let queued = if seq % 2 == 1 { 5_000_000 } else { 0 };
        p.egress_depart(&b, sent + queued, &Default::default());
    }
    assert_eq!(p.quality.read(Reg::Packets, 7), Some(7));
    assert_eq!(p.quality.lost(7), Some(3));
    assert_eq!(p.quality.reordered(7), Some(0));
    assert_eq!(p.quality.read(Reg::MaxSeq, 7), Some(9));
    assert_eq!(p.quality.read(Reg::PayloadType, 7), Some(8));
    // queueing delay variation is jitter: |D| = 5 ms = 40 units on every
    // step but 6 -> 8, so S = 40, 78, 114, 147, 138, 170 (J << 4)
    assert_eq!(p.quality.read(Reg::Jitter, 7), Some(170));
    let last = t0 + 9 * 20_000_000 + 5_000_000;
    assert_eq!(
        p.quality.read(Reg::LastSeen, 7),
        Some(u64::from((last / 1_000_000) as u32))
    );
    assert_eq!(p.stats.rtp_packets.load(Relaxed), 7);
    // RTCP and non-relayed packets bridge nothing to measure
    let mut rtcp = Udp4 {
        src: UAC,
        dst: RELAY,
        sport: 4001,
        dport: 20001,
        payload: rtp(8, 99, 0, 20),
        ..Udp4::default()
    }
    .build();
    let (_, b) = p.ingress(&mut rtcp, &meta(1));
    assert!(!b.relayed_rtp);
    let mut routed = Udp4 {
        dst: UAS,
        payload: rtp(8, 99, 0, 20),
        ..Udp4::default()
    }
    .build();
    let (_, b) = p.ingress(&mut routed, &meta(1));
    p.egress_depart(&b, t0, &Default::default());
    assert_eq!(p.quality.read(Reg::Packets, 7), Some(7));
}

#[test]
fn relay_miss_in_range_learns_once_and_still_forwards() {
    let (p, rx) = setup();
    let mk = |sport| {
        Udp4 {
            src: 0x6440_4d0a,
            dst: RELAY,
            sport,
            dport: 20010,
            ..Udp4::default()
        }
        .build()
    };
    for t in [10, 20, 30] {
        assert_eq!(p.process(&mut mk(7777), &meta(t)), Verdict::Forward(3));
    }
    let d = rx.try_recv().unwrap();
    assert_eq!(
        d,
        LearnDigest {
            src: 0x6440_4d0a,
            dst: RELAY,
            sport: 7777,
            dport: 20010,
            ingress_port: 1
        }
    );
    assert!(rx.try_recv().is_err());
    // ages out after learn_filter_age_ms
    let age = CONTRACT.config.learn_filter_age_ms;
    p.process(&mut mk(7777), &meta(10 + age));
    assert!(rx.try_recv().is_ok());
    // outside the port range: no digest
    let mut f = Udp4 {
        dst: RELAY,
        dport: 30000,
        ..Udp4::default()
    }
    .build();
    p.process(&mut f, &meta(50));
    assert!(rx.try_recv().is_err());
}

#[test]
fn guard_drops_foreign_sources_counts_per_leg_and_still_learns() {
    let (p, rx) = setup();
    install_call(&p);
    for dport in [20000, 20001] {
        p.guard
            .insert(
                GuardKey { dst: RELAY, dport },
                GuardAction::Drop { leg: 7 },
                0,
                0,
            )
            .unwrap();
    }
    let attacker = 0xc612_040a; // 198.18.4.10
    let mk = |src, sport, dport| {
        Udp4 {
            src,
            dst: RELAY,
            sport,
            dport,
            payload: rtp(0, 1, 1, 20),
            ..Udp4::default()
        }
        .build()
    };
    for t in [10, 20, 30] {
        assert_eq!(
            p.process(&mut mk(attacker, 5555, 20000), &meta(t)),
            Verdict::Drop(DropReason::Guarded)
        );
    }
    assert_eq!(p.guard_drops.read(7), Some(3));
    assert_eq!(p.stats.guard_drops.load(Relaxed), 3);
    // the digest is raised once (learn_filter), like any unmatched flow
    assert_eq!(rx.try_recv().unwrap().src, attacker);
    assert!(rx.try_recv().is_err());
    // the legitimate flow still relays; it hits relay, not the guard
    assert_eq!(
        p.process(&mut mk(UAC, 4000, 20000), &meta(50)),
        Verdict::Forward(2)
    );
    assert_eq!(p.guard_drops.read(7), Some(3));
    assert_eq!(p.legs.counts(7).0, 1, "the leg counts what it relayed");
    // RTCP port guarded too; an unguarded relay port still goes to the relay server
    assert_eq!(
        p.process(&mut mk(attacker, 5556, 20001), &meta(60)),
        Verdict::Drop(DropReason::Guarded)
    );
    assert_eq!(
        p.guard_drops.read(7),
        Some(4),
        "RTP and RTCP ports count on the leg"
    );
    assert_eq!(
        p.process(&mut mk(attacker, 5557, 20010), &meta(70)),
        Verdict::Forward(3)
    );
    // NoAction entries and addresses outside relay_addr do not drop
    p.guard
        .modify(
            &GuardKey {
                dst: RELAY,
                dport: 20000,
            },
            Some(GuardAction::NoAction),
            None,
            80,
        )
        .unwrap();
    assert_eq!(
        p.process(&mut mk(attacker, 5555, 20000), &meta(80)),
        Verdict::Forward(3)
    );
    p.guard
        .insert(
            GuardKey {
                dst: UAS,
                dport: 6000,
            },
            GuardAction::Drop { leg: 7 },
            0,
            0,
        )
        .unwrap();
    let mut to_uas = Udp4 {
        src: attacker,
        dst: UAS,
        dport: 6000,
        ..Udp4::default()
    }
    .build();
    assert_eq!(p.process(&mut to_uas, &meta(90)), Verdict::Forward(2));
}

#[test]
fn leg_without_rewrite_forwards_unchanged() {
    let (p, _) = setup();
    p.relay
        .insert(
            RelayKey {
                src: UAC,
                dst: UAS,
                sport: 1,
                dport: 2,
                port: 1,
            },
            RelayAction::Leg {
                leg: 50,
                rtcp: false,
            },
            0,
            0,
        )
        .unwrap();
    let mut f = Udp4 {
        src: UAC,
        dst: UAS,
        sport: 1,
        dport: 2,
        payload: rtp(0, 1, 1, 20),
        ..Udp4::default()
    }
    .build();
    assert_eq!(p.process(&mut f, &meta(1)), Verdict::Forward(2));
    assert_eq!(p.stats.leg_misses.load(Relaxed), 1);
}

#[test]
fn bad_frames_are_dropped_with_reasons() {
    let (p, _) = setup();
    let good = Udp4 {
        dst: UAS,
        ..Udp4::default()
    }
    .build();
    assert_eq!(
        p.process(&mut good[..5].to_vec(), &meta(1)),
        Verdict::Drop(DropReason::Truncated)
    );
    let mut arp = good.clone();
    arp[12] = 0x08;
    arp[13] = 0x06;
    assert_eq!(
        p.process(&mut arp, &meta(1)),
        Verdict::Drop(DropReason::NotIpv4)
    );
    let mut bad = good.clone();
    bad[14 + 12] ^= 1;
    assert_eq!(
        p.process(&mut bad, &meta(1)),
        Verdict::Drop(DropReason::BadIpChecksum)
    );
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 2048, .. Default::default() })]
    #[test]
    fn pipeline_never_panics(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300), flip in 0usize..300) {
        let (p, _) = setup();
        install_call(&p);
        let mut f = bytes;
        let _ = p.process(&mut f, &meta(1));
        // and valid relay frames with one byte corrupted
        let mut g = Udp4 { src: UAC, dst: RELAY, sport: 4000, dport: 20000, ..Udp4::default() }.build();
        let i = flip % g.len();
        g[i] = g[i].wrapping_add(1);
        let _ = p.process(&mut g, &meta(1));
    }
}

#[test]
fn relay_entries_match_only_their_ingress_port() {
    let (p, rx) = setup();
    install_call(&p);
    let on = |port: u16, ms: u32| Meta {
        ingress_port: port,
        ..meta(ms)
    };
    let spoofed = || {
        Udp4 {
            src: UAC,
            dst: RELAY,
            sport: 4000,
            dport: 20000,
            payload: rtp(0, 1, 1, 20),
            ..Udp4::default()
        }
        .build()
    };
    // The caller's exact flow arriving on port 3 misses the entry bound to
    // port 1: it goes to the relay server unchanged, never to the callee.
    let mut f = spoofed();
    assert_eq!(p.process(&mut f, &on(3, 10)), Verdict::Forward(3));
    let q = parse(&f).unwrap();
    assert_eq!((q.src, q.dst), (UAC, RELAY));
    let d = rx.try_recv().unwrap();
    assert_eq!((d.src, d.sport, d.ingress_port), (UAC, 4000, 3));
    assert_eq!(p.quality.read(Reg::Packets, 7), Some(0));
    // With the call's relay ports guarded it is dropped.
    p.guard
        .insert(
            GuardKey {
                dst: RELAY,
                dport: 20000,
            },
            GuardAction::Drop { leg: 7 },
            0,
            0,
        )
        .unwrap();
    assert_eq!(
        p.process(&mut spoofed(), &on(3, 20)),
        Verdict::Drop(DropReason::Guarded)
    );
    // The same flow on its own port is relayed, and its digest is not
    // suppressed by the spoofed copy's (the port is part of the flow).
    assert_eq!(p.process(&mut spoofed(), &on(1, 30)), Verdict::Forward(2));
    p.relay
        .delete(&RelayKey {
            src: UAC,
            dst: RELAY,
            sport: 4000,
            dport: 20000,
            port: 1,
        })
        .unwrap();
    p.guard
        .delete(&GuardKey {
            dst: RELAY,
            dport: 20000,
        })
        .unwrap();
    assert_eq!(p.process(&mut spoofed(), &on(1, 40)), Verdict::Forward(3));
    assert_eq!(rx.try_recv().unwrap().ingress_port, 1);
}

#[test]
fn unbound_ports_key_relay_on_the_unbound_port() {
    let (p, rx) = setup();
    let unbound = CONTRACT.config.unbound_port;
    // the caller's leg installed unbound (binding off), leg 7 as install_call
    p.legs
        .insert(
            7,
            Rewrite {
                src: RELAY,
                dst: UAS,
                sport: 20002,
                dport: 6000,
            },
        )
        .unwrap();
    let key = RelayKey {
        src: UAC,
        dst: RELAY,
        sport: 4000,
        dport: 20000,
        port: unbound,
    };
    p.relay
        .insert(
            key,
            RelayAction::Leg {
                leg: 7,
                rtcp: false,
            },
            0,
            0,
        )
        .unwrap();
    let on = |port: u16, ms: u32| Meta {
        ingress_port: port,
        ..meta(ms)
    };
    let pkt = || {
        Udp4 {
            src: UAC,
            dst: RELAY,
            sport: 4000,
            dport: 20000,
            payload: rtp(0, 1, 1, 20),
            ..Udp4::default()
        }
        .build()
    };
    // Every port bound (no entries): the unbound entry matches nothing.
    assert_eq!(p.process(&mut pkt(), &on(1, 10)), Verdict::Forward(3));
    assert_eq!(rx.try_recv().unwrap().ingress_port, 1);
    // Binding off on ports 1 and 3: relayed from either, to the callee.
    assert_eq!(p.port_binding.set(1, Some(true)), None);
    p.port_binding.set(3, Some(true));
    assert_eq!(p.process(&mut pkt(), &on(1, 3000)), Verdict::Forward(2));
    assert_eq!(p.process(&mut pkt(), &on(3, 3010)), Verdict::Forward(2));
    assert_eq!(p.legs.counts(7).0, 2);
    // Port 2 keeps its binding: the flow from there misses.
    assert_eq!(p.process(&mut pkt(), &on(2, 3020)), Verdict::Forward(3));
    // Its digest names the real port; the learn filter's flow has the bound
    // one, so an unbound flow reports once whichever unbound port it takes.
    assert_eq!(rx.try_recv().unwrap().ingress_port, 2);
    p.relay.delete(&key).unwrap();
    assert_eq!(p.process(&mut pkt(), &on(1, 3030)), Verdict::Forward(3));
    assert_eq!(rx.try_recv().unwrap().ingress_port, 1);
    assert_eq!(p.process(&mut pkt(), &on(3, 3040)), Verdict::Forward(3));
    assert!(rx.try_recv().is_err(), "same unbound flow: suppressed");
    // An entry of false is bound again; clear() forgets every entry.
    p.port_binding.set(1, Some(false));
    assert_eq!(p.port_binding.get(1), Some(false));
    assert!(!p.port_binding.unbound(1));
    p.clear();
    assert_eq!(p.port_binding.entries(), vec![]);
}
