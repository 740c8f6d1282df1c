//! Prometheus text exposition of the switch's counters (`GET /metrics`).

use std::fmt::Write;
use std::sync::atomic::Ordering::Relaxed;

use crate::contract::names;
use crate::grpc::Switch;
use crate::pipeline::DropReason;

fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

pub fn render(sw: &Switch) -> String {
    let mut o = String::with_capacity(8192);
    let ports = &sw.ports;
    let per_port = |o: &mut String,
                    name: &str,
                    kind: &str,
                    help: &str,
                    f: &dyn Fn(&crate::dataplane::Port) -> f64| {
        family(o, name, kind, help);
        for p in ports.iter() {
            let _ = writeln!(
                o,
                "{name}{{port=\"{}\",ifname=\"{}\"}} {}",
                p.id,
                p.ifname,
                f(p)
            );
        }
    };
    // Frames the XDP fast path carried count like any other (one map read per port).
    let fast_counts: Vec<_> = ports
        .iter()
        .map(|p| sw.pipeline.fast_port_counts(p.id))
        .collect();
    let fast = |p: &crate::dataplane::Port| {
        ports
            .iter()
            .position(|q| q.id == p.id)
            .map(|i| fast_counts[i])
            .unwrap_or_default()
    };
    per_port(
        &mut o,
        "p4relay_port_rx_packets_total",
        "counter",
        "Frames received",
        &|p| (p.stats.rx_packets.load(Relaxed) + fast(p).rx_packets) as f64,
    );
    per_port(
        &mut o,
        "p4relay_port_rx_bytes_total",
        "counter",
        "Bytes received (frames without FCS)",
        &|p| (p.stats.rx_bytes.load(Relaxed) + fast(p).rx_bytes) as f64,
    );
    per_port(
        &mut o,
        "p4relay_port_rx_ring_drops_total",
        "counter",
        "Frames the kernel dropped because a worker's RX ring was full (worker starved of CPU)",
        &|p| p.stats.rx_ring_drops.load(Relaxed) as f64,
    );
    per_port(
        &mut o,
        "p4relay_port_rx_wait_max_seconds",
        "gauge",
        "Longest time a frame waited in an RX ring for a worker",
        &|p| p.stats.max_rx_wait_ns.load(Relaxed) as f64 / 1e9,
    );
    per_port(
        &mut o,
        "p4relay_port_tx_packets_total",
        "counter",
        "Frames transmitted",
        &|p| (p.stats.egress.tx_packets.load(Relaxed) + fast(p).tx_packets) as f64,
    );
    per_port(
        &mut o,
        "p4relay_port_tx_bytes_total",
        "counter",
        "Bytes transmitted",
        &|p| (p.stats.egress.tx_bytes.load(Relaxed) + fast(p).tx_bytes) as f64,
    );
    per_port(
        &mut o,
        "p4relay_port_queue_drops_total",
        "counter",
        "Egress tail drops (queue full)",
        &|p| p.stats.egress.tail_drops.load(Relaxed) as f64,
    );
    per_port(
        &mut o,
        "p4relay_port_aqm_drops_total",
        "counter",
        "Dropped as they left the queue by the port's AQM (--port-aqm)",
        &|p| p.stats.egress.aqm_drops.load(Relaxed) as f64,
    );
    per_port(
        &mut o,
        "p4relay_port_disabled_drops_total",
        "counter",
        "Frames dropped because the port is disabled",
        &|p| p.stats.disabled_drops.load(Relaxed) as f64,
    );
    per_port(
        &mut o,
        "p4relay_port_queue_depth_packets",
        "gauge",
        "Egress queue depth, packets",
        &|p| u64::from(p.stats.egress.depth_pkts.load(Relaxed)) as f64,
    );
    per_port(
        &mut o,
        "p4relay_port_queue_depth_bytes",
        "gauge",
        "Egress queue depth, bytes",
        &|p| p.stats.egress.depth_bytes.load(Relaxed) as f64,
    );
    per_port(
        &mut o,
        "p4relay_port_queue_watermark_cells",
        "gauge",
        "Egress queue high watermark, 80-byte cells",
        &|p| u64::from(p.stats.egress.watermark_cells.load(Relaxed)) as f64,
    );
    per_port(
        &mut o,
        "p4relay_port_queue_delay_seconds",
        "gauge",
        "Queueing delay of the last packet sent",
        &|p| p.stats.egress.last_delay_ns.load(Relaxed) as f64 / 1e9,
    );
    per_port(
        &mut o,
        "p4relay_port_line_rate_bps",
        "gauge",
        "Egress line rate, bits/s (0 = unshaped)",
        &|p| p.stats.egress.rate_bps.load(Relaxed) as f64,
    );
    family(
        &mut o,
        "p4relay_port_ingress_drops_total",
        "counter",
        "Frames dropped by the pipeline, by reason",
    );
    for p in ports.iter() {
        for r in DropReason::ALL {
            let _ = writeln!(
                o,
                "p4relay_port_ingress_drops_total{{port=\"{}\",reason=\"{}\"}} {}",
                p.id,
                r.name(),
                p.stats.drops[r.index()].load(Relaxed)
            );
        }
    }
    let pl = &sw.pipeline;
    family(
        &mut o,
        "p4relay_table_entries",
        "gauge",
        "Entries installed per table",
    );
    family(&mut o, "p4relay_table_size", "gauge", "Capacity per table");
    let small = pl.small.load();
    for (name, used, size) in [
        (names::RELAY, pl.relay.len(), pl.relay.capacity()),
        (names::RELAY_GUARD, pl.guard.len(), pl.guard.capacity()),
        (names::LEG_REWRITE, pl.legs.len(), pl.legs.capacity()),
        (
            names::IPV4_LPM,
            small.lpm.len(),
            schema_size(sw, names::IPV4_LPM),
        ),
        (
            names::NEXTHOP,
            small.nexthop.len(),
            schema_size(sw, names::NEXTHOP),
        ),
        (
            names::RELAY_ADDR,
            small.relay_addr.len(),
            schema_size(sw, names::RELAY_ADDR),
        ),
    ] {
        let _ = writeln!(o, "p4relay_table_entries{{table=\"{name}\"}} {used}\np4relay_table_size{{table=\"{name}\"}} {size}");
    }
    let st = &pl.stats;
    let fast = pl.fast_pipeline_counts();
    for (name, help, v) in [
        ("p4relay_relay_hits_total", "Packets that matched pipe.Ingress.relay (both paths)", st.relay_hits.load(Relaxed) + fast.relay_hits),
        ("p4relay_relay_rewrites_total", "Packets rewritten by leg_rewrite (both paths)", st.relay_rewrites.load(Relaxed) + fast.relay_rewrites),
        ("p4relay_rtp_packets_total", "RTP packets measured by the quality registers (as they left the egress queue; both paths)", st.rtp_packets.load(Relaxed) + fast.rtp_packets),
    ] {
        family(&mut o, name, "counter", help);
        let _ = writeln!(o, "{name} {v}");
    }
    if let Some(io) = sw.dataplane_io.get() {
        family(&mut o, "p4relay_dataplane_io", "gauge", "What the user-space pipeline receives and sends on (af_xdp_copy, af_xdp_zerocopy, af_packet)");
        let _ = writeln!(o, "p4relay_dataplane_io{{io=\"{io}\"}} 1");
    }
    if let Some(mode) = sw.xdp_mode.get() {
        family(
            &mut o,
            "p4relay_xdp_mode",
            "gauge",
            "How the XDP fast path is attached (native, generic)",
        );
        let _ = writeln!(o, "p4relay_xdp_mode{{mode=\"{mode}\"}} 1");
    }
    if let Some(fp) = &pl.fastpath {
        let status = fp.status();
        for (name, kind, help, v) in [
            (
                "p4relay_xdp_ports",
                "gauge",
                "Ports with the XDP fast path attached",
                status.ports,
            ),
            (
                "p4relay_xdp_relayed_total",
                "counter",
                "Packets the XDP fast path relayed (included in the totals above)",
                fast.relay_rewrites,
            ),
            (
                "p4relay_xdp_relayed6_total",
                "counter",
                "Of the packets the XDP fast path relayed, the IPv6 ones",
                fast.relay6_rewrites,
            ),
            (
                "p4relay_xdp_relay6_entries",
                "gauge",
                "IPv6 relay entries in the XDP fast path's map (one per relay address of a relay6 entry)",
                status.relay6_entries,
            ),
            (
                "p4relay_xdp_relay_mirrored_total",
                "counter",
                "Relay entries written to the XDP fast path's map",
                status.relay_mirrored,
            ),
            (
                "p4relay_xdp_legs_full_total",
                "counter",
                "Legs the XDP map refused (full): their packets relayed in user space",
                status.legs_full,
            ),
            (
                "p4relay_xdp_relay_full_total",
                "counter",
                "Relay entries the XDP map refused (full): relayed in user space",
                status.relay_full,
            ),
            (
                "p4relay_xdp_relay_entries",
                "gauge",
                "Relay entries in the XDP fast path's map",
                status.relay_entries,
            ),
            (
                "p4relay_xdp_relay_spilled_entries",
                "gauge",
                "Relay entries not in the XDP fast path's map (map full: their packets take the user-space pipeline)",
                (pl.relay.len() as u64).saturating_sub(status.relay_entries),
            ),
        ] {
            family(&mut o, name, kind, help);
            let _ = writeln!(o, "{name} {v}");
        }
    }
    for (name, help, v) in [
        ("p4relay_relay_leg_misses_total", "relay hits whose leg has no leg_rewrite entry (forwarded unchanged)", &st.leg_misses),
        ("p4relay_guard_drops_total", "Foreign packets to a guarded relay port dropped by pipe.Ingress.relay_guard", &st.guard_drops),
        ("p4relay_learn_digests_total", "Learn digests raised", &st.learn_digests),
        ("p4relay_learn_suppressed_total", "Learn digests suppressed by learn_filter", &st.learn_suppressed),
        ("p4relay_learn_dropped_total", "Learn digests lost to a full digest queue (flow reports again after learn_filter_age_ms)", &st.learn_dropped),
        ("p4relay_fragments_total", "IPv4 fragments (routed, never relayed)", &st.fragments),
        ("p4relay_udp_bad_length_total", "UDP datagrams whose length disagrees with IPv4 (routed, never relayed)", &st.udp_bad_length),
        ("p4relay_udp6_zero_checksum_total", "IPv6 UDP datagrams without a checksum (invalid; routed, never relayed)", &st.udp6_zero_checksum),
        ("p4relay_grpc_updates_total", "BfRt updates applied", &sw.writes_ok),
        ("p4relay_grpc_write_failures_total", "BfRt Write calls that failed", &sw.writes_failed),
        ("p4relay_notifications_dropped_total", "Stream notifications lost to a slow or gone client", &sw.notifications_dropped),
        ("p4relay_reroute_notices_total", "Congestion notices made by detection (m consecutive packets over t_q)", &sw.pipeline.rr_stats.notices),
        ("p4relay_reroute_notices_lost_total", "Congestion notices lost to a full recirculation queue", &sw.pipeline.rr_stats.notices_lost),
        ("p4relay_reroute_moves_total", "Watched flows moved to their backup next hop", &sw.pipeline.rr_stats.moves),
        ("p4relay_reroute_upstream_total", "Congestion notices sent upstream (no backup here)", &sw.pipeline.rr_stats.upstream_sent),
        ("p4relay_reroute_refused_total", "Congestion notices dropped without effect (unwatched, forged, wrong port, already moved)", &sw.pipeline.rr_stats.refused),
        ("p4relay_reroute_digests_lost_total", "Reroute digests lost to a full digest queue", &sw.pipeline.rr_stats.digests_lost),
        ("p4relay_int_reports_sent_total", "Telemetry reports the INT sink sent to the collector", &sw.pipeline.int.reports_sent),
        ("p4relay_int_reports_suppressed_total", "INT sink report copies suppressed (no path change, no onset/clear, within the interval; or no int_report entry)", &sw.pipeline.int.reports_suppressed),
        ("p4relay_int_report_copies_lost_total", "INT sink report copies lost to a full queue toward the report port", &sw.pipeline.int.copies_dropped),
    ] {
        family(&mut o, name, "counter", help);
        let _ = writeln!(o, "{name} {}", v.load(Relaxed));
    }
    o
}

/// A table's size as served in bfrt.json.
fn schema_size(sw: &Switch, table: &str) -> usize {
    sw.schema
        .table_by_name(table)
        .map_or(0, |t| t.size as usize)
}
