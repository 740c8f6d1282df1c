//! The XDP program against the user-space pipeline, frame by frame
//! (BPF_PROG_TEST_RUN; needs root, as the rest of the suite's packet tests).

use std::sync::Arc;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

use super::*;
use crate::contract::CONTRACT;
use crate::packet::ipv6::testpkt::{udp6_checksum, Udp6, V6_RELAY, V6_UAC};
use crate::packet::testpkt::{rtp, Udp4};
use crate::pipeline::tests::{install_call, meta, setup, RELAY, UAC};
use crate::pipeline::tests6::install_call6;
use crate::pipeline::{Pipeline, Touched, Verdict};
use crate::schema::Reg;
use crate::tables::relay::Relay6Key;
use crate::tables::small6::{Relay6AddrAction, Relay6AddrKey};

const XDP_PASS: u32 = 2;
const XDP_REDIRECT: u32 = 4;
const LO: u32 = 1;

/// A pipeline with the fast path (ingress on `lo` as port 1; port 2 fast) and
/// a reference pipeline without, both with install_call's call.
fn pair() -> (Arc<FastPath>, Pipeline, Pipeline) {
    let fp = Arc::new(
        FastPath::load(XdpMode::Generic, 1024, 100, 8000, 4)
            .expect("load the XDP program (the Rust tests run as root)"),
    );
    fp.register_port(1, LO).unwrap();
    let p2 = PortVal {
        ifindex: LO,
        ..PortVal::default()
    };
    sys::update(fp.ports, &2u32, &p2, sys::BPF_ANY).unwrap();
    fp.set_port(1, true, true);
    fp.set_port(2, true, true);
    let (p, _) = setup();
    let p = p.with_fastpath(&CONTRACT, fp.clone());
    install_call(&p);
    p.mirror(&Touched {
        cleared: true,
        ..Touched::default()
    });
    let (r, _) = setup();
    install_call(&r);
    (fp, p, r)
}

/// Frames aimed at the call, valid and not: the RTP and RTCP flows, other
/// ports, TTL edge cases, options, VLAN, checksum flags, and single-byte damage.
fn frame() -> impl Strategy<Value = Vec<u8>> {
    (
        any::<u16>(),
        any::<u32>(),
        0u8..128,
        0usize..200,
        prop_oneof![Just(4000u16), Just(4001), Just(4002)],
        prop_oneof![Just(64u8), Just(0), Just(1), Just(2), Just(255)],
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        prop::option::of((0usize..300, any::<u8>())),
    )
        .prop_map(|(seq, ts, pt, len, sport, ttl, csum, opts, vlan, damage)| {
            let rtcp = sport == 4001;
            let mut f = Udp4 {
                src: UAC,
                dst: RELAY,
                sport,
                dport: if rtcp { 20001 } else { 20000 },
                ttl,
                payload: if rtcp {
                    vec![0x81, 200, 0, 6, 1, 2, 3, 4]
                } else {
                    rtp(pt, seq, ts, len)
                },
                udp_csum: csum,
                options: if opts { vec![1, 1, 1, 0] } else { vec![] },
                vlan: vlan.then_some(7),
            }
            .build();
            if let Some((at, b)) = damage {
                let i = at % f.len();
                f[i] ^= b.max(1);
            }
            f
        })
}

/// Runs `cases` frames through the XDP program and the reference pipeline
/// `r`: a redirected frame must be the pipeline's forward to port 2, byte for
/// byte; a passed frame must be untouched and get the same verdict from `p`
/// (the switch's own pipeline behind the fast path). Returns how many frames
/// the program relayed.
fn relays_as_the_pipeline(
    fp: &FastPath,
    p: &Pipeline,
    r: &Pipeline,
    frames: impl Strategy<Value = Vec<u8>>,
    cases: u32,
) -> u32 {
    let redirected = std::cell::Cell::new(0u32);
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(&frames, |f| {
            let (verdict, out) = sys::test_run(fp.prog, &f, LO).expect("BPF_PROG_TEST_RUN");
            let mut want = f.clone();
            let m = meta(5);
            let (v, b) = r.ingress(&mut want, &m);
            if let Verdict::Forward(_) = v {
                r.egress_depart(&b, m.now_ns, &Default::default());
            }
            match verdict {
                XDP_REDIRECT => {
                    prop_assert_eq!(v, Verdict::Forward(2));
                    prop_assert_eq!(&out, &want, "XDP and pipeline frames differ");
                    redirected.set(redirected.get() + 1);
                }
                XDP_PASS => {
                    prop_assert_eq!(&out, &f, "a passed frame must be untouched");
                    // What the switch then does with it: the user-space pipeline.
                    let mut g = f.clone();
                    let (v2, b2) = p.ingress(&mut g, &m);
                    if let Verdict::Forward(_) = v2 {
                        p.egress_depart(&b2, m.now_ns, &Default::default());
                    }
                    prop_assert_eq!(v2, v);
                }
                other => prop_assert!(false, "XDP verdict {other}"),
            }
            Ok(())
        })
        .unwrap();
    redirected.get()
}

#[test]
fn xdp_program_relays_exactly_as_the_pipeline() {
    let (fp, p, r) = pair();
    let redirected = relays_as_the_pipeline(&fp, &p, &r, frame(), 4000);
    // About 1 in 12 generated frames is a clean hit (the rest: TTL, options,
    // VLAN, damage, other ports), so a few hundred take the fast path.
    assert!(
        redirected > 150,
        "only {redirected} frames took the fast path"
    );
    // One set of counters and registers, whichever path each frame took:
    // the leg's counter (RTP and RTCP) and the entries' last hits.
    assert_eq!(p.leg_counts(7), r.leg_counts(7), "leg 7");
    assert!(p.leg_counts(7).0 >= u64::from(redirected));
    for key in [(4000u16, 20000u16), (4001, 20001)] {
        let k = crate::tables::relay::RelayKey {
            src: UAC,
            dst: RELAY,
            sport: key.0,
            dport: key.1,
            port: 1,
        };
        assert!(p.relay.get(&k, 5).is_some(), "{k:?}");
    }
    // A full Read (the kernel's map read once) sees every entry.
    let mut n = 0;
    p.for_each_relay_with_fast_idle(5, |_| n += 1);
    assert_eq!(n, r.relay.len());
    for reg in [Reg::Packets, Reg::Loss, Reg::MaxSeq, Reg::PayloadType] {
        assert_eq!(p.quality.read(reg, 7), r.quality.read(reg, 7), "{reg:?}");
    }
    let fast = p.fast_pipeline_counts();
    assert_eq!(u64::from(redirected), fast.relay_rewrites);
}

#[test]
fn a_write_reaches_the_kernel_before_it_returns() {
    let (fp, p, _) = pair();
    let f = Udp4 {
        src: UAC,
        dst: RELAY,
        sport: 4000,
        dport: 20000,
        ..Udp4::default()
    }
    .build();
    assert_eq!(sys::test_run(fp.prog, &f, LO).unwrap().0, XDP_REDIRECT);
    // Removed entry: passed to user space at once.
    let k = crate::tables::relay::RelayKey {
        src: UAC,
        dst: RELAY,
        sport: 4000,
        dport: 20000,
        port: 1,
    };
    p.relay.delete(&k).unwrap();
    p.mirror(&Touched {
        relay: vec![k],
        ..Touched::default()
    });
    assert_eq!(sys::test_run(fp.prog, &f, LO).unwrap().0, XDP_PASS);
    // A leg without a rewrite, or a shaped egress port: user space decides.
    let rtcp = Udp4 {
        src: UAC,
        dst: RELAY,
        sport: 4001,
        dport: 20001,
        payload: vec![0x81, 200, 0, 6, 1, 2, 3, 4],
        ..Udp4::default()
    }
    .build();
    assert_eq!(sys::test_run(fp.prog, &rtcp, LO).unwrap().0, XDP_REDIRECT);
    fp.set_port(2, true, false);
    assert_eq!(sys::test_run(fp.prog, &rtcp, LO).unwrap().0, XDP_PASS);
    fp.set_port(2, true, true);
    p.legs.delete(7).unwrap();
    p.mirror(&Touched {
        legs: vec![7],
        ..Touched::default()
    });
    assert_eq!(sys::test_run(fp.prog, &rtcp, LO).unwrap().0, XDP_PASS);
}

/// A full kernel map: the entries beyond it stay in user space and are
/// counted (entries in the map, refusals); removals and clears keep the count.
#[test]
fn relay_entries_beyond_the_map_spill_and_are_counted() {
    let fp = FastPath::load(XdpMode::Generic, 2, 100, 8000, 4)
        .expect("load the XDP program (the Rust tests run as root)");
    let key = |sport: u16| crate::tables::relay::RelayKey {
        src: UAC,
        dst: RELAY,
        sport,
        dport: 20000,
        port: 1,
    };
    for s in 0..3 {
        fp.mirror_relay(&key(s), Some((1, false)));
    }
    let st = fp.status();
    assert_eq!((st.relay_entries, st.relay_full), (2, 1));
    assert!(sys::lookup::<_, RelayVal>(fp.relay, &key_c(&key(2))).is_none());
    // Re-pointing an entry does not count it twice.
    fp.mirror_relay(&key(0), Some((2, false)));
    assert_eq!(fp.status().relay_entries, 2);
    fp.mirror_relay(&key(0), None);
    fp.mirror_relay(&key(0), None);
    assert_eq!(fp.status().relay_entries, 1);
    fp.mirror_relay(&key(2), Some((1, false)));
    assert_eq!(fp.status().relay_entries, 2);
    fp.clear_relay();
    assert_eq!(fp.status().relay_entries, 0);
}

/// GRO on or off on `ifname` (SIOCETHTOOL, ETHTOOL_SGRO): on, a veth runs
/// NAPI.
fn set_gro(ifname: &str, on: bool) {
    #[repr(C)]
    struct EthtoolValue {
        cmd: u32,
        data: u32,
    }
    #[repr(C)]
    struct IfReq {
        name: [u8; 16],
        data: *mut EthtoolValue,
        _pad: [u8; 16],
    }
    let mut v = EthtoolValue {
        cmd: 0x2c,
        data: u32::from(on),
    };
    let mut r = IfReq {
        name: [0; 16],
        data: &mut v,
        _pad: [0; 16],
    };
    r.name[..ifname.len()].copy_from_slice(ifname.as_bytes());
    // SAFETY: a datagram socket for the ioctl; `r` and `v` outlive it.
    unsafe {
        let s = libc::socket(libc::AF_INET, libc::SOCK_DGRAM, 0);
        assert!(s >= 0, "socket");
        let rc = libc::ioctl(s, 0x8946, &mut r);
        libc::close(s);
        assert_eq!(rc, 0, "ETHTOOL_SGRO {ifname}");
    }
}

/// Native redirect into a veth reaches its peer only while the peer runs
/// NAPI: the probe sees the drop with GRO off and the delivery with it on; a
/// port refused native TX is never marked fast for the program.
#[test]
fn native_redirect_probe_follows_the_peers_napi() {
    std::thread::spawn(|| {
        // SAFETY: unshare affects only this thread's namespaces.
        assert_eq!(
            unsafe { libc::unshare(libc::CLONE_NEWNET) },
            0,
            "unshare (root)"
        );
        for args in [
            "link set lo up",
            "link add s1 type veth peer name p1",
            "link set s1 up",
            "link set p1 up",
        ] {
            let st = std::process::Command::new("ip")
                .args(args.split_whitespace())
                .status()
                .expect("run ip");
            assert!(st.success(), "ip {args}");
        }
        let fp = FastPath::load(XdpMode::Native, 16, 16, 8000, 4)
            .expect("load the XDP program (the Rust tests run as root)");
        assert!(!fp.native_tx_reaches("s1").unwrap(), "peer without NAPI");
        set_gro("p1", true);
        assert!(fp.native_tx_reaches("s1").unwrap(), "peer with GRO on");
        set_gro("p1", false);
        assert!(
            !fp.native_tx_reaches("s1").unwrap(),
            "peer with GRO off again"
        );
        assert!(fp.native_tx_reaches("nosuch0").is_err());

        fp.attach(1, "s1", XdpMode::Native).unwrap();
        fp.set_port(1, true, true);
        assert_eq!(sys::lookup::<_, PortVal>(fp.ports, &1u32).unwrap().fast, 1);
        fp.refuse_native_tx(1);
        assert_eq!(sys::lookup::<_, PortVal>(fp.ports, &1u32).unwrap().fast, 0);
        fp.set_port(1, true, true);
        let p = sys::lookup::<_, PortVal>(fp.ports, &1u32).unwrap();
        assert_eq!((p.enabled, p.fast), (1, 0));
    })
    .join()
    .expect("test thread");
}

/// Legs are cells of an array, listed from the softswitch's own record: a
/// re-pointed leg gets a new generation, a cleared one none, one beyond the
/// array is counted and left to user space.
#[test]
fn legs_are_rewritten_in_place_with_a_new_generation() {
    let fp = FastPath::load(XdpMode::Generic, 16, 100, 8000, 4)
        .expect("load the XDP program (the Rust tests run as root)");
    let r = LegRoute {
        src: 1,
        dst: 2,
        sport: 3,
        dport: 4,
        port: 2,
        smac: [2; 6],
        dmac: [3; 6],
        valid: true,
    };
    fp.mirror_leg(7, r);
    fp.mirror_leg(64, r);
    assert_eq!(fp.mirrored_legs(), vec![7, 64]);
    let a: LegRouteC = sys::lookup(fp.legs, &7u32).unwrap();
    fp.mirror_leg(7, LegRoute { dport: 5, ..r });
    let b: LegRouteC = sys::lookup(fp.legs, &7u32).unwrap();
    assert!(a.valid != 0 && b.valid != 0 && a.valid != b.valid);
    assert_eq!((a.dport, b.dport), (4, 5));
    fp.mirror_leg(7, LegRoute { valid: false, ..r });
    assert_eq!(fp.mirrored_legs(), vec![64]);
    assert_eq!(
        sys::lookup::<_, LegRouteC>(fp.legs, &7u32).unwrap().valid,
        0
    );
    fp.mirror_leg(100, r);
    assert_eq!((fp.status().legs_full, fp.mirrored_legs()), (1, vec![64]));
}

/// `pair` for an IPv6 call (pipeline/tests6.rs install_call6: leg 7 from
/// port 1 rewritten to V6_RELAY:20002 -> V6_UAS:6000 on port 2).
fn pair6() -> (Arc<FastPath>, Pipeline, Pipeline) {
    let fp = Arc::new(
        FastPath::load(XdpMode::Generic, 1024, 100, 8000, 4)
            .expect("load the XDP program (the Rust tests run as root)"),
    );
    fp.register_port(1, LO).unwrap();
    let p2 = PortVal {
        ifindex: LO,
        ..PortVal::default()
    };
    sys::update(fp.ports, &2u32, &p2, sys::BPF_ANY).unwrap();
    fp.set_port(1, true, true);
    fp.set_port(2, true, true);
    let (p, _) = setup();
    let p = p.with_fastpath(&CONTRACT, fp.clone());
    install_call6(&p);
    p.mirror(&Touched {
        cleared: true,
        ..Touched::default()
    });
    let (r, _) = setup();
    install_call6(&r);
    (fp, p, r)
}

/// IPv6 frames aimed at the call: RTP and RTCP, another port, hop limits,
/// a zero UDP checksum, a Fragment header, VLAN and single-byte damage.
fn frame6() -> impl Strategy<Value = Vec<u8>> {
    (
        any::<u16>(),
        any::<u32>(),
        0u8..128,
        0usize..200,
        prop_oneof![Just(4000u16), Just(4001), Just(4002)],
        prop_oneof![Just(64u8), Just(0), Just(1), Just(2), Just(255)],
        prop_oneof![Just(17u8), Just(17), Just(17), Just(44), Just(58)],
        prop::bool::weighted(0.2),
        prop::bool::weighted(0.2),
        prop::option::of((0usize..300, any::<u8>())),
    )
        .prop_map(
            |(seq, ts, pt, len, sport, hop_limit, next_header, zero, vlan, damage)| {
                let rtcp = sport == 4001;
                let mut f = Udp6 {
                    sport,
                    dport: if rtcp { 20001 } else { 20000 },
                    hop_limit,
                    payload: if rtcp {
                        vec![0x81, 200, 0, 6, 1, 2, 3, 4, 5]
                    } else {
                        rtp(pt, seq, ts, len)
                    },
                    vlan: vlan.then_some(7),
                    next_header,
                    ..Udp6::default()
                }
                .build();
                let l4 = if vlan { 18 + 40 } else { 14 + 40 };
                if zero {
                    f[l4 + 6] = 0;
                    f[l4 + 7] = 0;
                }
                if let Some((at, b)) = damage {
                    let i = at % f.len();
                    f[i] ^= b.max(1);
                }
                f
            },
        )
}

#[test]
fn xdp_program_relays_ipv6_exactly_as_the_pipeline() {
    let (fp, p, r) = pair6();
    let redirected = relays_as_the_pipeline(&fp, &p, &r, frame6(), 3000);
    assert!(
        redirected > 150,
        "only {redirected} frames took the fast path"
    );
    // One set of counters and registers, whichever path each frame took.
    assert_eq!(p.leg6_counts(7), r.legs6.counts(7), "leg 7");
    assert!(p.leg6_counts(7).0 >= u64::from(redirected));
    for reg in [Reg::Packets, Reg::Loss, Reg::MaxSeq, Reg::PayloadType] {
        assert_eq!(p.quality.read(reg, 7), r.quality.read(reg, 7), "{reg:?}");
    }
    let fast = p.fast_pipeline_counts();
    assert_eq!(u64::from(redirected), fast.relay6_rewrites);
    assert_eq!(fast.relay6_rewrites, fast.relay_rewrites);
    // The kernel's last hits reach the entries' idle times.
    let k = v6_key(4000, 20000);
    assert!(p.fast_last_hit6(&k).is_some());
    let mut n = 0;
    p.for_each_relay6_with_fast_idle(5, |_| n += 1);
    assert_eq!(n, r.relay6.len());
}

fn v6_key(sport: u16, dport: u16) -> Relay6Key {
    Relay6Key {
        src: V6_UAC,
        relay_id: 3,
        sport,
        dport,
        port: 1,
    }
}

#[test]
fn an_ipv6_write_reaches_the_kernel_before_it_returns() {
    let (fp, p, _) = pair6();
    let rtp6 = Udp6::default().build();
    let rtcp6 = Udp6 {
        sport: 4001,
        dport: 20001,
        payload: vec![0x81, 200, 0, 6],
        ..Udp6::default()
    }
    .build();
    assert_eq!(sys::test_run(fp.prog, &rtp6, LO).unwrap().0, XDP_REDIRECT);
    assert_eq!(fp.status().relay6_entries, 2);
    // Removed entry: passed to user space at once.
    let k = v6_key(4000, 20000);
    p.relay6.delete(&k).unwrap();
    p.mirror(&Touched {
        relay6: vec![k],
        ..Touched::default()
    });
    assert_eq!(sys::test_run(fp.prog, &rtp6, LO).unwrap().0, XDP_PASS);
    assert_eq!(fp.status().relay6_entries, 1);
    // relay6_addr maps relay_id 3 to another address: the entries follow.
    const OTHER: u128 = V6_RELAY + 1;
    p.small
        .update(|t| {
            let old = *t.v6.relay_addr.keys().next().unwrap();
            t.v6.relay_addr_write(old, None, false)?;
            t.v6.relay_addr_write(
                Relay6AddrKey { dst: OTHER, ..old },
                Some(Relay6AddrAction::MarkRelay6 { relay_id: 3 }),
                true,
            )
        })
        .unwrap();
    p.mirror(&Touched {
        routes: true,
        ..Touched::default()
    });
    assert_eq!(sys::test_run(fp.prog, &rtcp6, LO).unwrap().0, XDP_PASS);
    let mut to_other = rtcp6.clone();
    to_other[14 + 24..14 + 40].copy_from_slice(&OTHER.to_be_bytes());
    // the checksum covers the destination: fix it for the new one
    let q = crate::packet::ipv6::parse_at(&to_other, 14).unwrap();
    let c = udp6_checksum(&to_other, &q);
    to_other[14 + 46..14 + 48].copy_from_slice(&c.to_be_bytes());
    let (v, out) = sys::test_run(fp.prog, &to_other, LO).unwrap();
    assert_eq!(v, XDP_REDIRECT);
    let q = crate::packet::ipv6::parse_at(&out, 14).unwrap();
    assert_eq!(crate::packet::rd16(&out, 14 + 46), udp6_checksum(&out, &q));
    // A shaped egress port, then a leg without a rewrite: user space decides.
    fp.set_port(2, true, false);
    assert_eq!(sys::test_run(fp.prog, &to_other, LO).unwrap().0, XDP_PASS);
    fp.set_port(2, true, true);
    p.legs6.delete(7).unwrap();
    p.mirror(&Touched {
        legs6: vec![7],
        ..Touched::default()
    });
    assert_eq!(fp.mirrored_legs6(), Vec::<u32>::new());
    assert_eq!(sys::test_run(fp.prog, &to_other, LO).unwrap().0, XDP_PASS);
}

#[test]
fn ipv6_legs_hold_a_cell_while_a_rewrite_or_an_entry_needs_it() {
    let sizes = Sizes {
        legs6: 2,
        ..Sizes::v4(16, 100)
    };
    let fp = FastPath::load_sized(XdpMode::Generic, sizes, 8000, 4)
        .expect("load the XDP program (the Rust tests run as root)");
    let r = LegRoute6 {
        src: 1,
        dst: 2,
        sport: 3,
        dport: 4,
        port: 2,
        smac: [2; 6],
        dmac: [3; 6],
        valid: true,
    };
    let t = |sport| Relay6Tuple {
        src: 9,
        dst: 10,
        sport,
        dport: 20000,
        port: 1,
    };
    let slot = |sport| {
        sys::lookup::<_, RelayVal>(fp.relay6, &key6_c(&t(sport)))
            .unwrap()
            .slot
    };
    // The entry comes first: its leg takes a cell the rewrite then fills.
    fp.mirror_relay6(&t(1), Some((7, false)));
    fp.mirror_leg6(7, r);
    let c7 = slot(1);
    let a: Leg6RouteC = sys::lookup(fp.legs6, &c7).unwrap();
    assert_eq!((a.leg, a.dport), (7, 4));
    assert_ne!(a.valid, 0);
    // In place, a new generation.
    fp.mirror_leg6(7, LegRoute6 { dport: 5, ..r });
    let b: Leg6RouteC = sys::lookup(fp.legs6, &c7).unwrap();
    assert!(b.valid != 0 && b.valid != a.valid && b.dport == 5);
    // The second cell, then none left: the third leg spills to user space.
    fp.mirror_leg6(8, r);
    fp.mirror_relay6(&t(2), Some((9, false)));
    assert_eq!(slot(2), NO_CELL);
    fp.mirror_leg6(9, r);
    assert_eq!(fp.status().legs_full, 1);
    assert_eq!(fp.mirrored_legs6(), vec![7, 8]);
    // Leg 7's rewrite goes: its cell is cleared, but kept while the entry
    // points to it; the entry gone, the cell is free for another leg.
    fp.mirror_leg6(7, LegRoute6 { valid: false, ..r });
    assert_eq!(
        sys::lookup::<_, Leg6RouteC>(fp.legs6, &c7).unwrap().valid,
        0
    );
    fp.mirror_relay6(&t(3), Some((10, false)));
    assert_eq!(slot(3), NO_CELL);
    fp.mirror_relay6(&t(1), None);
    fp.mirror_relay6(&t(3), Some((10, true)));
    assert_eq!(slot(3), c7);
    // Re-pointed to a leg with a cell: the old one's is freed.
    fp.mirror_relay6(&t(3), Some((8, false)));
    fp.mirror_leg6(11, r);
    assert_eq!(fp.mirrored_legs6(), vec![8, 11]);
    fp.clear_relay6();
    fp.mirror_leg6(8, LegRoute6 { valid: false, ..r });
    fp.mirror_leg6(12, r);
    assert_eq!(fp.mirrored_legs6(), vec![11, 12]);
}
