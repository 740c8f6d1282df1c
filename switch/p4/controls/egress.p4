/* p4relay — egress: what happens after the queue.
 *
 * 1. Length check: drop IPv4 packets whose total_len (IPv6: payload_len +
 *    40) claims more bytes than the frame has. Tofino 1 knows the packet length only here
 *    (eg_intr_md.pkt_length, the packet as it entered: the bridged header is
 *    not counted). Two saturating operations give the overrun (0 = the
 *    datagram fits): end = total_len + 14 (18 with 802.1Q), overrun =
 *    end - pkt_length.
 *    pkt_length is compared without subtracting an FCS: if the hardware
 *    counts the 4 FCS bytes, an overrun of up to 4 bytes passes.
 * 2. RerouteDetect (WITH_REROUTE): hot departures of watched flows, the
 *    notice copy (controls/reroute.p4).
 * 3. RtpQuality for relayed RTP of an offloaded leg (leg and rtcp bit bridged
 *    from Ingress) that passed the length check, timed by the egress global
 *    timestamp, i.e. at departure. Its jitter write-back copies (E2E mirror)
 *    come back here, write rtp_jitter and are dropped.
 * 4. Ired (WITH_IRED): the port's queue average and drop decision; a
 *    decision leaves as an E2E mirror copy to the recirculation port
 *    (controls/ired.p4).
 * 5. INT (WITH_INT): sink strip and the sink's report copy (IntSink), source
 *    and transit hop (IntTransit).
 *
 * Every step is a single-stage item (README "Stages"); the compiler overlaps
 * the chains (stage map in README "Resources"):
 *   l3_end -> l3_overrun -> drop / rtp_on
 *   clock halves -> transit -> rtp_transit (|D|), J + 8 -> terms -> J' + 8
 *   rtp_packets -> rtp_max_seq (loss code) -> rtp_loss (lost or reordered)
 *   reroute_class -> over -> reroute_run -> left -> notice
 *   ired_port -> ired_qdepth_prev -> ... -> ired_drop_prob -> decision
 */
control Egress(
        inout egress_headers_t hdr,
        inout egress_metadata_t eg_md,
        in egress_intrinsic_metadata_t eg_intr_md,
        in egress_intrinsic_metadata_from_parser_t eg_prsr_md,
        inout egress_intrinsic_metadata_for_deparser_t eg_dprsr_md,
        inout egress_intrinsic_metadata_for_output_port_t eg_oport_md) {

#ifdef WITH_RTP_QUALITY
    MsClock() ms_clock;
    RtpClock() rtp_clock;
    RtpQuality() rtp_quality;
#endif
#ifdef WITH_INT
    IntTransit() int_transit;
    IntSink() int_sink;
#endif
#ifdef WITH_IRED
    Ired() ired;
#endif

    action l3_end_ethernet() {
        eg_md.l3_end = hdr.ipv4.total_len |+| 14;
    }

    action l3_end_vlan() {
        eg_md.l3_end = hdr.ipv4.total_len |+| 18;
    }

#ifdef WITH_IPV6
    /* IPv6: payload_len counts what follows the 40-byte header */
    action l3_end_ethernet6() {
        eg_md.l3_end = hdr.ipv6.payload_len |+| 54;
    }

    action l3_end_vlan6() {
        eg_md.l3_end = hdr.ipv6.payload_len |+| 58;
    }

#ifdef L3_END_TABLE
    /* The four cases in one step: a table of constant entries is one
     * logical table where the if/else takes a gateway and four (stage 0 has
     * 16 for both gresses, and Tofino 1's relay needs one of them there). */
    @hidden
    table l3_end {
        key = {
            hdr.ipv6.isValid()     : exact;
            hdr.vlan_tag.isValid() : exact;
        }
        actions = {
            l3_end_ethernet;
            l3_end_vlan;
            l3_end_ethernet6;
            l3_end_vlan6;
        }
        const entries = {
            (false, false) : l3_end_ethernet();
            (false, true)  : l3_end_vlan();
            (true, false)  : l3_end_ethernet6();
            (true, true)   : l3_end_vlan6();
        }
        default_action = l3_end_ethernet();
        size = 4;
    }
#endif
#define EGRESS_IP_VALID (hdr.ipv4.isValid() || hdr.ipv6.isValid())
#else
#define EGRESS_IP_VALID hdr.ipv4.isValid()
#endif

    action l3_overrun() {
        eg_md.l3_overrun = eg_md.l3_end |-| eg_intr_md.pkt_length;
    }

#ifdef WITH_REROUTE
    RerouteDetect() reroute_detect;
#define REROUTE_COPY hdr.reroute_notice.isValid()
#else
#define REROUTE_COPY false
#endif

#ifdef WITH_QUEUE_DELAY
    /* the traffic manager's enqueue-to-dequeue time of this packet */
    action queue_delay() {
        eg_md.queue_delay_ns = (bit<32>)eg_intr_md.deq_timedelta;
    }
#endif

    action drop_overrun() {
        eg_dprsr_md.drop_ctl = 1;
    }

#ifdef WITH_RTP_QUALITY
    action drop_writeback_copy() {
        eg_dprsr_md.drop_ctl = 1;
    }
#endif

    /* A flat sequence of single-stage items: Tofino 1 has no long branches,
     * so a gated block spanning several stages keeps every other item out of
     * them. Each feature gates its steps on bits computed once (header
     * validity, the bridged bits, its own table's hit) and writes
     * drop_ctl / mirror_type in chain order: the length check (stage 2),
     * iRED's tail drop, INT's suppression; the reroute notice, then the
     * jitter write-back unless a notice goes, then iRED's decision unless
     * a notice goes (one mirror per packet). */
    apply {
#ifdef WITH_QUEUE_DELAY
        queue_delay();
#endif
        /* 1. length check: the arithmetic for every packet (it only writes
         * l3_end / l3_overrun), the verdict for IPv4 packets */
#if defined(L3_END_TABLE)
        l3_end.apply();
#elif defined(WITH_IPV6)
        if (hdr.ipv6.isValid()) {
            if (hdr.vlan_tag.isValid()) {
                l3_end_vlan6();
            } else {
                l3_end_ethernet6();
            }
        } else if (hdr.vlan_tag.isValid()) {
            l3_end_vlan();
        } else {
            l3_end_ethernet();
        }
#else
        if (hdr.vlan_tag.isValid()) {
            l3_end_vlan();
        } else {
            l3_end_ethernet();
        }
#endif
        l3_overrun();
        if (EGRESS_IP_VALID && !REROUTE_COPY && eg_md.l3_overrun != 0) {
            drop_overrun();
        }
#ifdef WITH_RTP_QUALITY
        /* Time bases for every packet (arithmetic only, no state): they start
         * in the first stage, beside the length check. */
        ms_clock.apply(eg_prsr_md.global_tstamp, eg_md.now_ms);
        rtp_clock.apply(eg_prsr_md.global_tstamp, hdr.rtp.timestamp, eg_md.rtp_transit);
        if (eg_md.writeback.isValid()) {
            /* jitter write-back copy (no packet headers parsed): it writes
             * rtp_jitter and is never transmitted */
            drop_writeback_copy();
        }
#endif
#ifdef WITH_REROUTE
        /* before RtpQuality and Ired: a notice copy takes the packet's one
         * mirror (its jitter sample, or its iRED decision, waits) */
        reroute_detect.apply(hdr, eg_md, eg_intr_md, eg_prsr_md, eg_dprsr_md);
#endif
#ifdef WITH_RTP_QUALITY
        /* it picks its packets itself: write-back copies, and relayed RTP
         * (bridged) that passed the length check */
        rtp_quality.apply(hdr, eg_md, eg_dprsr_md);
#endif
#ifdef WITH_IRED
        /* packets from Ingress only (it checks hdr.bridged) */
        ired.apply(hdr, eg_md, eg_intr_md, eg_dprsr_md);
#endif
#ifdef WITH_INT
        /* INT: the sink's strip or, on its report copy, the report; this
         * switch's hop (source, transit). Each picks its packets by header
         * bits (int_sink.p4, int_transit.p4). */
        int_sink.apply(hdr, eg_md, eg_intr_md, eg_dprsr_md);
        int_transit.apply(hdr, eg_md, eg_intr_md, eg_prsr_md);
#endif
    }
}
