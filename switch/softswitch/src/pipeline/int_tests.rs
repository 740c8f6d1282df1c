//! INT through source, transit and sink switches, frame by frame (each
//! switch: Ingress, then the Egress pass at the head of its queue).

use super::int_sink::{REPORT_HEADER_BYTES, SINK_MD_BITS, SINK_MD_BYTES};
use super::int_source::{
    flow_slot, flow_slot6, IntReportCopy, FLAG_ONSET, FLAG_ONSET_HOP1, FLAG_ONSET_HOP2,
    FLAG_OVER_CLEAR,
};
use super::int_transit::traffic_class;
use super::tests::{meta, setup, UAC, UAS};
use super::*;
use crate::dataplane::egress::SLOT;
use crate::packet::ipv6::parse_at;
use crate::packet::ipv6::testpkt::{udp6_checksum, Udp6, V6_UAC, V6_UAS};
use crate::packet::testpkt::Udp4;
use crate::packet::{ipv4_checksum, parse, rd16, rd32, wr16};
use crate::schema::IntReg;
use crate::tables::small::{IntHop, IntReportEncap};
use crate::tables::small::{IntRoleAction, IntWatchAction, IntWatchKey, LpmAction};

const SHIM: usize = 14 + 20 + 8;

/// A switch whose next hop 2 (port 2) is `role`, with hop `id` on port 2
/// and a collector on port 3.
fn switch(role: IntRoleAction, id: u32, onset: (u32, u32), clear: (u32, u32)) -> Pipeline {
    let (p, _) = setup();
    p.small
        .update(|t| {
            t.int_watch_write(
                IntWatchKey {
                    priority: 1,
                    relay: (0, 0),
                    leg: (0, 0),
                    src: (0, 0),
                    dst: (UAS & 0xffff_ff00, 0xffff_ff00),
                    dport: (0, 0),
                },
                Some(IntWatchAction::WatchFlow),
                true,
            )?;
            t.int_role_write(2, Some(role), true)?;
            t.int_hop_config_write(
                2,
                Some(IntHop {
                    switch_id: id,
                    onset_cells: onset.0,
                    clear_cells: clear.0,
                    onset_ns: onset.1,
                    clear_ns: clear.1,
                }),
                true,
            )?;
            t.int_report_write(
                3,
                Some(IntReportEncap {
                    src_mac: [2, 0, 0, 0, 0, 0x33],
                    dst_mac: [2, 0, 0, 0, 0, 0x44],
                    src_addr: 0x0a00_0001,
                    dst_addr: 0x0a00_0002,
                    dst_port: 32766,
                    switch_id: id,
                }),
                true,
            )
        })
        .unwrap();
    p
}

fn quiet() -> (u32, u32) {
    (1000, 1_000_000)
}

/// Ingress then the Egress pass with `deq` cells behind and `delay` ns.
fn hop(p: &Pipeline, f: &[u8], deq: u32, delay: u64, now_ms: u32) -> (Verdict, Vec<u8>, Bridged) {
    let mut buf = vec![0u8; SLOT];
    buf[..f.len()].copy_from_slice(f);
    let (v, b) = p.ingress(&mut buf[..f.len()], &meta(now_ms));
    let Verdict::Forward(port) = v else {
        return (v, vec![], b);
    };
    let mut e = EgressPass {
        deq_cells: deq,
        enq_cells: deq,
        queue_delay_ns: delay,
        buf: &mut buf,
        len: f.len(),
    };
    let ev = p.egress_head(port, &b, &mut e, u64::from(now_ms) * 1_000_000);
    assert_eq!(ev, EgressVerdict::Send);
    let n = e.len;
    (v, buf[..n].to_vec(), b)
}

/// The Egress pass of a report copy leaving by `port`.
fn report(p: &Pipeline, port: u16, copy: &[u8], b: &Bridged, now_ms: u32) -> Option<Vec<u8>> {
    let mut buf = vec![0u8; SLOT];
    buf[..copy.len()].copy_from_slice(copy);
    let mut e = EgressPass {
        deq_cells: 0,
        enq_cells: 0,
        queue_delay_ns: 0,
        buf: &mut buf,
        len: copy.len(),
    };
    match p.egress_head(port, b, &mut e, u64::from(now_ms) * 1_000_000) {
        EgressVerdict::Send => {
            let n = e.len;
            Some(buf[..n].to_vec())
        }
        _ => None,
    }
}

fn rtp_packet() -> Vec<u8> {
    let mut f = Udp4 {
        src: UAC,
        dst: UAS,
        sport: 4000,
        dport: 5000,
        ..Udp4::default()
    }
    .build();
    // DSCP EF, ECN 1: both must survive
    f[15] = (46 << 2) | 1;
    let c = ipv4_checksum(&f[14..34]);
    wr16(&mut f, 24, c);
    f
}

#[test]
fn source_transit_sink_restore_the_datagram_byte_for_byte() {
    let orig = rtp_packet();
    let s1 = switch(IntRoleAction::Transit, 0x11, quiet(), (500, 500_000));
    let (v, f1, b) = hop(&s1, &orig, 7, 1234, 10);
    assert_eq!(v, Verdict::Forward(2));
    assert!(b.int_source && b.int_transit);
    assert_eq!(f1.len(), orig.len() + 36);
    let q = parse(&f1).expect("valid IPv4 with INT");
    assert_eq!(f1[15] >> 2, 0x17);
    assert_eq!(f1[15] & 3, 1);
    assert_eq!(q.total_len, orig.len() - 14 + 36);
    assert_eq!(rd16(&f1, 38), rd16(&orig, 38) + 36); // UDP length
    assert_eq!(rd16(&f1, 40), 0); // UDP checksum off while INT is on board
    assert_eq!(&f1[SHIM..SHIM + 4], &[0x10, 9, 0, 46 << 2]);
    let md = SHIM + 4;
    assert_eq!(&f1[md..md + 4], &[0x20, 0, 5, 1]);
    assert_eq!(rd16(&f1, md + 4), 0xF100);
    assert_eq!(rd16(&f1, md + 6), 0x7072);
    assert_eq!(rd16(&f1, md + 8), rd16(&orig, 40));
    assert_eq!(rd16(&f1, md + 10), 0x11); // signature, no flags
    let h = md + 12;
    assert_eq!(rd32(&f1, h), 0x11);
    assert_eq!(rd16(&f1, h + 4), 1); // ingress port
    assert_eq!(rd16(&f1, h + 6), 2); // egress port
    assert_eq!(rd32(&f1, h + 8), 1234); // hop latency = queueing delay
    assert_eq!(rd32(&f1, h + 12), 7); // queue 0, occupancy at dequeue
    assert_eq!(rd32(&f1, h + 16), orig.len() as u32); // tx bytes of port 2
                                                      // an unbound ingress port keys the relay on the unbound port; the hop
                                                      // still names the port the packet came in on
    s1.port_binding.set(1, Some(true));
    let (_, unbound, _) = hop(&s1, &orig, 0, 0, 10);
    assert_eq!(rd16(&unbound, h + 4), 1);
    s1.port_binding.set(1, None);
    assert_eq!(&f1[h + 20..], &orig[SHIM..]);

    // the second switch adds its hop on top, and sees congestion
    let s2 = switch(
        IntRoleAction::Transit,
        0x22,
        (100, 1_000_000),
        (50, 500_000),
    );
    let (v, f2, b) = hop(&s2, &f1, 150, 99, 10);
    assert_eq!(v, Verdict::Forward(2));
    assert!(!b.int_source && b.int_transit && b.int_hops == 1);
    assert_eq!(f2.len(), f1.len() + 20);
    parse(&f2).unwrap();
    assert_eq!(f2[SHIM + 1], 14);
    assert_eq!(f2[md + 3], 0);
    // onset with the second hop's place bit
    assert_eq!(
        rd16(&f2, md + 10),
        (0x11 ^ 0x22) | FLAG_ONSET | FLAG_ONSET_HOP2 | FLAG_OVER_CLEAR
    );
    assert_eq!(rd32(&f2, h), 0x22, "newest hop first");
    assert_eq!(rd32(&f2, h + 12), 150);
    assert_eq!(rd32(&f2, h + 20), 0x11);
    // a sink reads the marked hop: switch 0x22, its egress port 2
    let sink = switch(IntRoleAction::Sink, 0x44, quiet(), quiet());
    let (_, _, b) = hop(&sink, &f2, 0, 0, 10);
    assert!(b.int_sink);
    assert_eq!(b.int_onset_hop, Some((0x22, 2)));
    // the first hop's bit alone: the sink names the source's hop
    let mut first = f2.clone();
    wr16(
        &mut first,
        md + 10,
        (0x11 ^ 0x22) | FLAG_ONSET | FLAG_ONSET_HOP1,
    );
    let (_, _, b) = hop(&sink, &first, 0, 0, 10);
    assert_eq!(b.int_onset_hop, Some((0x11, 2)));
    // no place bit: no hop named
    let (_, _, b) = hop(&sink, &f1, 0, 0, 10);
    assert_eq!(b.int_onset_hop, None);

    // a third transit has no hop left: E bit, counted, nothing added
    let s3 = switch(IntRoleAction::Transit, 0x33, quiet(), quiet());
    let (_, f3, _) = hop(&s3, &f2, 0, 0, 10);
    assert_eq!(f3.len(), f2.len());
    assert_eq!(f3[md] & 0x04, 0x04);
    assert_eq!(s3.int.read(IntReg::HopLimit, 0), Some(1));

    // the sink strips and restores: the datagram the source received
    let s4 = switch(IntRoleAction::Sink, 0x44, quiet(), quiet());
    let (v, f4, b) = hop(&s4, &f3, 9, 4321, 10);
    assert_eq!(v, Verdict::Forward(2));
    assert!(b.int_sink);
    assert_eq!(f4.len(), orig.len());
    let q = parse(&f4).unwrap();
    assert_eq!(q.ttl, 64 - 4);
    assert_eq!(f4[15], orig[15], "DSCP and ECN restored");
    assert_eq!(&f4[16..22], &orig[16..22]);
    assert_eq!(&f4[23..24], &orig[23..24]);
    assert_eq!(&f4[26..], &orig[26..], "addresses, UDP header and payload");
    // and the report copy waits for the collector's port
    let (port, copy, cb) = s4.take_int_copy().expect("report copy");
    assert_eq!(port, 3);
    assert_eq!(copy.len(), f3.len());
    assert_eq!(copy[SHIM] & 3, 1, "the copy's shim is marked");
    let r = cb.int_report.unwrap();
    assert_eq!(r.frame_len as usize, f3.len());
    assert_eq!(r.flow_slot, flow_slot(UAC, UAS, 4000, 5000));
    assert_eq!((r.ingress_port, r.egress_port), (1, 2));
    let rep = report(&s4, port, &copy, &cb, 10).expect("first report of the flow");
    let head = REPORT_HEADER_BYTES + SINK_MD_BYTES;
    assert_eq!(rep.len(), copy.len() + head);
    let q = parse(&rep).unwrap();
    assert_eq!((q.src, q.dst), (0x0a00_0001, 0x0a00_0002));
    assert_eq!(q.total_len, copy.len() + 60);
    let u = q.udp.unwrap();
    assert_eq!((u.src_port, u.dst_port), (32766, 32766));
    assert_eq!(rd32(&rep, 42) >> 28, 2, "report version 2");
    assert_eq!(rd32(&rep, 46), 0x44, "node id");
    assert_eq!(rep[50], 0x13);
    // the sink's own hop as the report's metadata: md_len 3, its ports,
    // the time and depth its port's last departure had
    assert_eq!(
        rep[51] as usize,
        (12 + 12 + copy.len()).div_ceil(4),
        "rep_len"
    );
    assert_eq!(rep[52], 3, "md_len");
    assert_eq!(rd16(&rep, 54), SINK_MD_BITS);
    assert_eq!((rd16(&rep, 62), rd16(&rep, 64)), (1, 2), "sink's ports");
    assert_eq!(rd32(&rep, 66), 4321, "sink's hop latency");
    assert_eq!(rd32(&rep, 70), 9, "sink's queue 0, occupancy");
    assert_eq!(&rep[head..], &copy[..]);
}

#[test]
fn the_sinks_hop_is_carried_only_from_the_report_ports_pipe() {
    let s = switch(IntRoleAction::Sink, 0x44, quiet(), quiet());
    s.int.write(IntReg::SinkDepth, 2, 17);
    s.int.write(IntReg::SinkLatency, 2, 5000);
    let copy = vec![0u8; 120];
    let b = |egress_port: u16, slot: u16| Bridged {
        int_report: Some(IntReportCopy {
            flow_slot: slot,
            ds_flags: 0x11,
            frame_len: 120,
            ingress_port: 1,
            egress_port,
        }),
        ..Bridged::default()
    };
    let rep = report(&s, 3, &copy, &b(2, 1), 10).unwrap();
    assert_eq!((rep[52], rd32(&rep, 66), rd32(&rep, 70)), (3, 5000, 17));
    // a sink port of pipe 1 (dev port 130): the report port's pipe has no
    // record of it (Tofino's registers are per pipe): no metadata
    let rep = report(&s, 3, &copy, &b(130, 2), 10).unwrap();
    assert_eq!(rep.len(), copy.len() + REPORT_HEADER_BYTES);
    assert_eq!((rep[52], rd16(&rep, 54)), (0, 0));
    assert_eq!(&rep[REPORT_HEADER_BYTES..], &copy[..]);
}

#[test]
fn malformed_int_is_dropped_and_counted() {
    let s = switch(IntRoleAction::Transit, 1, quiet(), quiet());
    let good = {
        let s1 = switch(IntRoleAction::Transit, 0x11, quiet(), quiet());
        hop(&s1, &rtp_packet(), 0, 0, 1).1
    };
    let md = SHIM + 4;
    let cases: Vec<(usize, u8)> = vec![
        (SHIM, 0x20),   // type 2 (INT-MD expected)
        (SHIM + 1, 10), // shim length of no hop count
        (SHIM + 1, 19), // three hops: over the bound
        (md, 0x10),     // version 1
        (md + 2, 6),    // 6-word hops
        (md + 3, 0),    // remaining count disagrees with the length
        (md + 4, 0xff), // other instructions
    ];
    for (i, (off, val)) in cases.iter().enumerate() {
        let mut f = good.clone();
        f[*off] = *val;
        let (v, _, _) = hop(&s, &f, 0, 0, 1);
        assert_eq!(v, Verdict::Drop(DropReason::IntMalformed), "case {i}");
        assert_eq!(s.int.read(IntReg::Malformed, 0), Some(i as u64 + 1));
    }
    // UDP too short for shim + MD header
    let mut f = rtp_packet();
    f[15] = 0x17 << 2;
    let c = ipv4_checksum(&f[14..34]);
    wr16(&mut f, 24, c);
    wr16(&mut f, 38, 20);
    let (v, _, _) = hop(&s, &f, 0, 0, 1);
    assert_eq!(v, Verdict::Drop(DropReason::IntMalformed));
    // a stack longer than the datagram
    let mut f = good.clone();
    f.truncate(SHIM + 20);
    let total = (f.len() - 14) as u16;
    wr16(&mut f, 16, total);
    let c = ipv4_checksum(&f[14..34]);
    wr16(&mut f, 24, c);
    let (v, _, _) = hop(&s, &f, 0, 0, 1);
    assert_eq!(v, Verdict::Drop(DropReason::IntMalformed));
    assert_eq!(
        s.int.read(IntReg::Malformed, 0),
        Some(cases.len() as u64 + 2)
    );
    // the well-formed one passes
    assert_eq!(hop(&s, &good, 0, 0, 1).0, Verdict::Forward(2));
}

#[test]
fn unwatched_and_options_packets_pass_untouched() {
    let s = switch(IntRoleAction::Transit, 1, quiet(), quiet());
    let mut f = Udp4 {
        src: UAC,
        dst: 0x0a00_0005, // port 40: not in the watch list
        ..Udp4::default()
    }
    .build();
    let mut buf = f.clone();
    let (v, b) = s.ingress(&mut buf, &meta(1));
    assert!(matches!(v, Verdict::Forward(_)) || v == Verdict::Drop(DropReason::NoSuchPort));
    assert!(!b.int_source);
    f = Udp4 {
        src: UAC,
        dst: UAS,
        options: vec![1, 1, 1, 1],
        ..Udp4::default()
    }
    .build();
    let (_, out, b) = hop(&s, &f, 0, 0, 1);
    assert!(!b.int_source, "only IPv4 without options carries INT");
    assert_eq!(out.len(), f.len());
}

#[test]
fn reports_are_suppressed_in_the_data_plane() {
    let s = switch(IntRoleAction::Sink, 9, quiet(), quiet());
    let copy = vec![0u8; 120];
    let b = |flags: u16| Bridged {
        int_report: Some(IntReportCopy {
            flow_slot: 7,
            ds_flags: flags,
            frame_len: 120,
            ingress_port: 1,
            egress_port: 2,
        }),
        ..Bridged::default()
    };
    let sent = |flags: u16, ms: u32| report(&s, 3, &copy, &b(flags), ms).is_some();
    assert!(sent(0x0011, 5000), "first report of the flow");
    assert!(
        !sent(0x0011, 5001),
        "same path, no congestion, within the interval"
    );
    assert!(!sent(0x0011, 5999));
    assert!(sent(0x0011, 6000), "interval elapsed");
    assert!(sent(0x0012, 6001), "path change");
    assert!(!sent(0x0012, 6002));
    assert!(sent(0x0012 | FLAG_ONSET | FLAG_OVER_CLEAR, 6003), "onset");
    assert!(
        !sent(
            0x0012 | FLAG_ONSET | FLAG_ONSET_HOP2 | FLAG_OVER_CLEAR,
            6004
        ),
        "still congested"
    );
    assert!(
        !sent(0x0012 | FLAG_OVER_CLEAR, 6005),
        "between the thresholds: kept"
    );
    assert_eq!(s.int.read(IntReg::FlowCongested, 7), Some(1));
    assert!(sent(0x0012, 6006), "clear");
    assert_eq!(s.int.read(IntReg::FlowCongested, 7), Some(0));
    assert!(!sent(0x0012, 6007));
    assert_eq!(s.int.read(IntReg::ReportSeq, 0), Some(5));
    assert_eq!(s.int.read(IntReg::FlowPath, 7), Some(0x12));
    // another flow has its own slot
    let other = Bridged {
        int_report: Some(IntReportCopy {
            flow_slot: 8,
            ds_flags: 0x12,
            frame_len: 120,
            ingress_port: 1,
            egress_port: 2,
        }),
        ..Bridged::default()
    };
    assert!(report(&s, 3, &copy, &other, 6008).is_some());
    // no int_report entry on the port: no report
    assert!(report(&s, 1, &copy, &other, 9000).is_none());
}

#[test]
fn hop_latency_and_depth_saturate_at_tnas_widths() {
    let md = SHIM + 4;
    let h = md + 12;
    let flags = |f: &[u8]| rd16(f, md + 10) & (FLAG_ONSET | FLAG_OVER_CLEAR);
    // a latency onset of 1 ms is beyond deq_timedelta's 18 bits: a 50 ms
    // queue reports 262,143 ns and is never at onset
    let s = switch(
        IntRoleAction::Transit,
        0x11,
        (u32::MAX, 1_000_000),
        (u32::MAX, 500_000),
    );
    let (_, f, _) = hop(&s, &rtp_packet(), 0, 50_000_000, 10);
    assert_eq!(rd32(&f, h + 8), 262_143);
    assert_eq!(flags(&f), 0);
    // 200 us is within it
    let s = switch(
        IntRoleAction::Transit,
        0x11,
        (u32::MAX, 200_000),
        (u32::MAX, 100_000),
    );
    let (_, f, _) = hop(&s, &rtp_packet(), 0, 50_000_000, 10);
    assert_eq!(flags(&f), FLAG_ONSET | FLAG_OVER_CLEAR);
    // depths stop at 19 bits: 524,288 cells is never reached
    let s = switch(
        IntRoleAction::Transit,
        0x11,
        (524_288, u32::MAX),
        (524_288, u32::MAX),
    );
    let (_, f, _) = hop(&s, &rtp_packet(), 600_000, 0, 10);
    assert_eq!(rd32(&f, h + 12), 524_287);
    assert_eq!(flags(&f), 0);
}

/// `switch`, with IPv6 routes (2001:db8:2::/48 by next hop 2, port 2) and
/// that prefix traced (`int_watch6`).
fn switch6(role: IntRoleAction, id: u32, onset: (u32, u32), clear: (u32, u32)) -> Pipeline {
    let p = switch(role, id, onset, clear);
    p.small
        .update(|t| {
            t.v6.lpm_write(V6_UAS, 48, Some(LpmAction::SetNexthop(2)), true)?;
            t.int_watch6_write(V6_UAS, 48, Some(IntWatchAction::WatchFlow), true)
        })
        .unwrap();
    p
}

/// The IPv6 packet's UDP checksum verifies (a receiver's sum).
fn udp6_valid(f: &[u8]) -> bool {
    let p = parse_at(f, 14).expect("valid IPv6");
    let u = p.udp.expect("UDP");
    rd16(f, u.off + 6) == udp6_checksum(f, &p)
}

#[test]
fn ipv6_source_transit_sink_keep_the_udp_checksum_valid() {
    let orig = Udp6 {
        src: V6_UAC,
        dst: V6_UAS,
        dport: 5000,
        // DSCP EF, ECN 1: both must survive
        traffic_class: (46 << 2) | 1,
        ..Udp6::default()
    }
    .build();
    let udp = 14 + 40;
    let shim = udp + 8;
    let md = shim + 4;
    let csum = rd16(&orig, udp + 6);
    assert!(udp6_valid(&orig));

    // the source: shim, MD header and its hop; the checksum stays valid
    let s1 = switch6(IntRoleAction::Transit, 0x11, quiet(), (500, 500_000));
    let (v, f1, b) = hop(&s1, &orig, 7, 1234, 10);
    assert_eq!(v, Verdict::Forward(2));
    assert!(b.int_source && b.int_transit && b.int_v6);
    assert_eq!(f1.len(), orig.len() + 36);
    assert!(udp6_valid(&f1), "the source's checksum");
    assert_eq!(traffic_class(&f1, 14), (0x17 << 2) | 1);
    assert_eq!(rd16(&f1, 18), rd16(&orig, 18) + 36); // payload length
    assert_eq!(rd16(&f1, udp + 4), rd16(&orig, udp + 4) + 36);
    assert_eq!(&f1[shim..shim + 4], &[0x10, 9, 0, 46 << 2]);
    assert_eq!(&f1[md..md + 4], &[0x20, 0, 5, 1]);
    assert_eq!(
        rd16(&f1, md + 8),
        csum,
        "ds_instruction: the datagram's own"
    );
    assert_eq!(rd32(&f1, md + 12), 0x11);
    assert_eq!(rd32(&f1, md + 20), 1234);
    assert_eq!(&f1[md + 32..], &orig[shim..]);

    // a transit: its hop on top, congested; the checksum still valid
    let s2 = switch6(
        IntRoleAction::Transit,
        0x22,
        (100, 1_000_000),
        (50, 500_000),
    );
    let (_, f2, b) = hop(&s2, &f1, 150, 99, 10);
    assert!(!b.int_source && b.int_hops == 1 && b.int_v6);
    assert_eq!(f2.len(), f1.len() + 20);
    assert!(udp6_valid(&f2), "the transit's checksum");
    assert_eq!(f2[shim + 1], 14);
    assert_eq!(
        rd16(&f2, md + 10),
        (0x11 ^ 0x22) | FLAG_ONSET | FLAG_ONSET_HOP2 | FLAG_OVER_CLEAR
    );
    assert_eq!(rd32(&f2, md + 12), 0x22, "newest hop first");
    // no hop left: the E bit, counted; still valid
    let (_, f3, _) = hop(&s2, &f2, 0, 0, 10);
    assert_eq!(f3.len(), f2.len());
    assert_eq!(f3[md] & 0x04, 0x04);
    assert!(udp6_valid(&f3), "the E bit's checksum");
    assert_eq!(s2.int.read(IntReg::HopLimit, 0), Some(1));

    // the sink: the datagram as the source received it, but for the path's
    // hop limit and MACs; it names the congested hop for its notice
    let sink = switch6(IntRoleAction::Sink, 0x44, quiet(), quiet());
    let (_, out, b) = hop(&sink, &f2, 0, 0, 10);
    assert!(b.int_sink && b.int_v6);
    assert_eq!(b.int_onset_hop, Some((0x22, 2)));
    assert_eq!(out.len(), orig.len());
    assert_eq!(&out[14..21], &orig[14..21]);
    assert_eq!(out[21], orig[21] - 3, "three hops");
    assert_eq!(&out[22..], &orig[22..]);
    assert!(udp6_valid(&out));
    // and its report copy: the frame as it left the sink's ingress
    let (port, copy, cb) = sink.take_int_copy().expect("report copy");
    assert_eq!(port, 3);
    let r = cb.int_report.expect("mirror header");
    assert_eq!(usize::from(r.frame_len), f2.len());
    assert_eq!(
        r.flow_slot,
        flow_slot6(V6_UAC, V6_UAS, 4000, 5000),
        "the flow's slot over its IPv6 addresses"
    );
    assert_eq!(copy.len(), f2.len());
}

#[test]
fn ipv6_int_is_not_relayed_and_untraced_prefixes_pass() {
    // a destination outside the traced prefix passes untouched
    let s1 = switch6(IntRoleAction::Transit, 0x11, quiet(), quiet());
    s1.small
        .update(|t| t.int_watch6_write(V6_UAS, 48, None, false))
        .unwrap();
    let orig = Udp6 {
        src: V6_UAC,
        dst: V6_UAS,
        ..Udp6::default()
    }
    .build();
    let (_, f, b) = hop(&s1, &orig, 0, 0, 10);
    assert!(!b.int_source);
    assert_eq!(f.len(), orig.len());
    assert!(udp6_valid(&f));
}
