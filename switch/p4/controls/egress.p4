/* p4relay — egress: what happens after the queue.
 *
 * 1. Length check: drop IPv4 packets whose total_len claims more bytes than
 *    the frame has. Tofino 1 knows the packet length only here
 *    (eg_intr_md.pkt_length, the packet as it entered: the bridged header is
 *    not counted). Two saturating operations give the overrun (0 = the
 *    datagram fits): end = total_len + 14 (18 with 802.1Q), overrun =
 *    end - pkt_length.
 *    pkt_length is compared without subtracting an FCS: if the hardware
 *    counts the 4 FCS bytes, an overrun of up to 4 bytes passes.
 * 2. RtpQuality for relayed RTP of an offloaded leg (leg and rtcp bit bridged
 *    from Ingress) that passed the length check, timed by the egress global
 *    timestamp, i.e. at departure. Its jitter write-back copies (E2E mirror)
 *    come back here, write rtp_jitter and are dropped.
 * 3. INT (WITH_INT): source and transit hop (IntTransit), sink strip and
 *    the sink's report copy (IntSink).
 * 4. Ired (P4RELAY_IRED): the port's queue average and drop decision; a
 *    decision leaves as an E2E mirror copy to the recirculation port
 *    (controls/ired.p4).
 *
 * Dependency chains (MAU stages, compiler placement in README "Resources"):
 *   l3_end -> l3_overrun -> drop / RtpQuality's gate
 *   clock halves -> transit -> rtp_transit (|D|) -> J + |D| ... J'
 *   rtp_packets -> rtp_max_seq -> lost/reordered sort -> rtp_lost
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

    apply {
#ifdef WITH_QUEUE_DELAY
        queue_delay();
#endif
        if (hdr.ipv4.isValid() && !REROUTE_COPY) {
            if (hdr.vlan_tag.isValid()) {
                l3_end_vlan();
            } else {
                l3_end_ethernet();
            }
            l3_overrun();
            if (eg_md.l3_overrun != 0) {
                eg_dprsr_md.drop_ctl = 1;
            }
        }
#ifdef WITH_RTP_QUALITY
        /* Time bases for every packet (arithmetic only, no state): they start
         * in the first stage, beside the length check. */
        ms_clock.apply(eg_prsr_md.global_tstamp, eg_md.now_ms);
        rtp_clock.apply(eg_prsr_md.global_tstamp, hdr.rtp.timestamp, eg_md.rtp_transit);
        if (eg_md.writeback.isValid()) {
            /* jitter write-back copy (no packet headers parsed): it writes
             * rtp_jitter and is never transmitted */
            eg_dprsr_md.drop_ctl = 1;
        }
        /* applied once (it holds the registers); it picks the packets itself:
         * write-back copies, and relayed RTP that passed the length check */
#ifdef WITH_INT
        if (!REROUTE_COPY && !hdr.int_report_mirror.isValid()) {
#else
        if (!REROUTE_COPY) {
#endif
            rtp_quality.apply(hdr, eg_md, eg_dprsr_md);
        }
#endif
#ifdef WITH_REROUTE
        /* after RtpQuality: a notice copy replaces that packet's jitter
         * write-back copy (one mirror per packet; one jitter sample lost) */
        reroute_detect.apply(hdr, eg_md, eg_intr_md, eg_dprsr_md);
#endif
#ifdef WITH_INT
        /* 3. INT: this switch's hop (source, transit), then the sink's strip
         * or, on the sink's report copy, the report (int_transit.p4,
         * int_sink.p4) */
        /* mutually exclusive: the placement may overlap their stages */
        if (hdr.int_report_mirror.isValid()
                || (hdr.int_bridged.isValid() && hdr.int_bridged.sink == 1)) {
            int_sink.apply(hdr, eg_md, eg_intr_md, eg_dprsr_md);
        } else {
            int_transit.apply(hdr, eg_md, eg_intr_md, eg_prsr_md);
        }
#endif
#ifdef WITH_IRED
        /* packets from Ingress only (not the copies' own passes) */
        if (hdr.bridged.isValid()) {
            ired.apply(hdr, eg_md, eg_intr_md);
        }
        /* Ired's verdicts take effect here, last: one write point for
         * drop_ctl and mirror_type keeps its chain parallel to the others */
        if (eg_md.ired_tail_dropped == 1) {
            eg_dprsr_md.drop_ctl = 1;
        }
        if (eg_md.ired_mirror.isValid()) {
            eg_dprsr_md.mirror_type = MIRROR_TYPE_IRED;
        }
#endif
    }
}
