/* p4relay — ingress pipeline: the order of the features and what gates them.
 *
 * Every control-plane name lives directly under Ingress (the contract's
 * pipe.Ingress.<table>, Ingress.<action>, pipe.Ingress.<register>): the
 * feature controls declare their objects with absolute @name(".Ingress.x")
 * annotations, so file structure and API names stay independent.
 *
 * RTP quality is measured after the queue (Egress, RtpQuality); Ingress
 * bridges what Egress needs (relay hit, rtcp bit, leg) in hdr.bridged.
 *
 * Every step is a single-stage item gated by bits computed once (README
 * "Stages": Tofino 1 has no long branches). Chain, as the compiler places it
 * (standard profile; README "Resources" has the stage map):
 *   relay beside relay_guard -> leg_rewrite (and the guard's drop) ->
 *   ipv4_lpm beside reroute_watch -> reroute_active -> backup next hop ->
 *   nexthop beside int_role -> ired_drop_flag -> its counters;
 *   ired_spare (iRED's signalling class, header fields) beside relay;
 *   clock slices -> 2 adds -> learn_filter (its output is the digest type).
 */
#ifdef WITH_REROUTE
#define REROUTE_NOTICE hdr.reroute_notice.isValid()
#else
#define REROUTE_NOTICE false
#endif
#ifdef WITH_IRED
#define IRED_FEEDBACK hdr.ired_feedback.isValid()
#else
#define IRED_FEEDBACK false
#endif

control Ingress(
        inout ingress_headers_t hdr,
        inout ingress_metadata_t ig_md,
        in ingress_intrinsic_metadata_t ig_intr_md,
        in ingress_intrinsic_metadata_from_parser_t ig_prsr_md,
        inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
        inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {

#if __TARGET_TOFINO__ == 2 && defined(WITH_REROUTE)
    MsClockTicks() clock;
#else
    MsClock() clock;
#endif
    RelaySessions() relay_sessions;
#ifdef WITH_IPV6
    RelaySessions6() relay6_sessions;
#endif
    GuardCount() guard_count;
    LearnFilter() learning;
#ifdef WITH_IPV6
    LearnFilter6() learning6;
#endif
    Forwarding() forwarding;
#ifdef WITH_INT
    IntCheck() int_check;
    IntWatch() int_watch;
    IntSource() int_source;
#endif
#ifdef WITH_IRED
    IredSpare() ired_spare;
    IredDrop() ired_drop;
#endif

    action guard_drop_packet() {
        ig_dprsr_md.drop_ctl = 1;
    }

    apply {
        if (hdr.ethernet.ether_type == ETHERTYPE_ARP || ig_md.icmp6_ndp) {
            /* ARP, and IPv6's NDP and MLD (the parser's icmp6_ndp): the
             * switch's Linux side answers them */
            ig_tm_md.ucast_egress_port = CPU_PORT;
            ig_tm_md.bypass_egress = 1;
            hdr.bridged.setInvalid();   /* egress bypassed: nothing strips it */
#ifdef WITH_INT
            hdr.int_bridged.setInvalid();
#endif
        } else if (!hdr.ipv4.isValid() && !hdr.ipv6.isValid() && !IRED_FEEDBACK) {
            /* no L2 switching: non-IP frames end here (iRED's recirculated
             * feedback copies go on to IredDrop, which drops them) */
            ig_dprsr_md.drop_ctl = 1;
        } else if (ig_md.ipv4_malformed || ig_md.ipv4_checksum_err || ig_md.ipv6_malformed) {
            ig_dprsr_md.drop_ctl = 1;
#ifdef WITH_INT
        } else if (ig_md.int_malformed) {
            /* INT the parser rejected (int_source.p4): dropped, counted */
            ig_dprsr_md.drop_ctl = 1;
            int_check.apply();
#endif
        } else if (hdr.ipv4.isValid() && hdr.ipv4.ttl <= 1 && !REROUTE_NOTICE) {
            /* expired: dropped, no ICMP time-exceeded from the data plane */
            ig_dprsr_md.drop_ctl = 1;
        } else if (hdr.ipv6.isValid() && hdr.ipv6.hop_limit <= 1) {
            /* the same for IPv6 (a congestion notice carrying an IPv6
             * header too: it ends here): no ICMPv6 time exceeded */
            ig_dprsr_md.drop_ctl = 1;
        } else {
            /* A flat sequence: each feature's steps are single-stage items
             * gated by bits computed once (Tofino 1 has no long branches,
             * so a gated block spanning stages would serialise the rest).
             * Each family's relay steps are gated by its header and write
             * fields of their own, so neither waits for the other. */
#if __TARGET_TOFINO__ == 2 && defined(WITH_REROUTE)
            /* the parser's ingress_mac_tstamp[47:16] (rtp_clock.p4) */
            clock.apply(hdr.bridged.rr_ingress_ts, ig_md.now_ms);
#else
            clock.apply(ig_intr_md.ingress_mac_tstamp, ig_md.now_ms);
#endif
            /* A congestion notice (REROUTE_NOTICE: its IPv4 header is the
             * flow's packet's) is no session's packet: it goes by its
             * destination through Forwarding to Reroute, which consumes it.
             * INT packets are routed, not relayed: the relay switch is the
             * source of its sessions' INT (RelaySessions' RELAY_LOOKUP). */
            relay_sessions.apply(hdr, ig_md);
#ifdef WITH_IPV6
            relay6_sessions.apply(hdr, ig_md);
#endif
#ifdef WITH_IRED
            /* header fields only: beside the relay tables, so IredDrop after
             * the chain waits for nothing but the egress port */
            ired_spare.apply(hdr, ig_md);
#endif
#ifdef WITH_INT6
            /* int_watch (IPv4) or int_watch6 (IPv6) */
            int_watch.apply(hdr, ig_md);
#elif defined(WITH_INT)
            if (hdr.ipv4.isValid()) {
                int_watch.apply(hdr, ig_md);
            }
#endif

            /* hdr.bridged (parser constants, relay_leg's fields) goes to
             * Egress first and is stripped there: RtpQuality runs after the
             * queue, on relay hits that are not RTCP. */
            if (ig_md.relay_dst && !ig_md.relay_hit && !REROUTE_NOTICE) {
                /* also for a guarded port: the agent sees the foreign source */
                learning.apply(hdr, ig_md, ig_dprsr_md);
            }
#ifdef WITH_IPV6
            /* IPv6 learning beside the relay chain, before Reroute's digest
             * (the same digest_type field): after Forwarding its register
             * step lands in the last stages, whose stateful ALUs iRED's
             * counters and the egress quality registers need */
            if (ig_md.relay6_dst && !ig_md.relay6_hit) {
                learning6.apply(hdr, ig_md, ig_dprsr_md);
            }
#endif
            if (GUARD_DROP) {
                /* a foreign source sending to an offloaded call's relay port:
                 * never reaches RTPProxy (it would latch to it); the digest
                 * set above is still sent (the deparser emits digests of
                 * dropped packets, as switch.p4's STP learning state relies
                 * on). Forwarding still runs (ungated: its result is unused).
                 * An IPv6 guard hit is dropped in Forwarding. */
                guard_drop_packet();
            }
            guard_count.apply(ig_md);
            forwarding.apply(hdr, ig_md, ig_intr_md, ig_dprsr_md, ig_tm_md);
#ifdef WITH_INT
            /* roles of the next hop, the sink's report copy (no INT packet
             * meets the guard: they skip the relay tables) */
            int_source.apply(hdr, ig_md, ig_dprsr_md, ig_tm_md);
#endif
#ifdef WITH_IRED
            /* after Forwarding (it needs the egress port); also takes the
             * recirculated feedback copies (no IP header: every step above
             * that acts on a packet is gated on one). A step of this flat
             * sequence, not one after the whole if/else chain: on Tofino 1
             * that would wait for the chain's last stage, whatever the data
             * needs. */
            ired_drop.apply(hdr, ig_md, ig_tm_md, ig_dprsr_md);
#endif
        }
    }
}
