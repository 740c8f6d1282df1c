/* p4relay — egress parser.
 *
 * After the intrinsic metadata comes either the bridged header (a packet
 * from Ingress) or a jitter write-back copy's mirror header: the first byte
 * (pkt_type) tells which. Then Ethernet, 802.1Q, IPv4 (Egress checks
 * total_len) and, with RTP quality, the IPv4 option words, UDP and the RTP
 * fixed header by the same rules as the ingress parser; Egress decides from
 * the bridged relay/rtcp bits whether RtpQuality runs. (Selecting on those
 * bits here would need them kept in parser match registers across three
 * states; parsing UDP/RTP of every packet costs nothing extra in PHV.)
 * Only IPv4 and IPv6 reach egress; ARP and the CPU's ICMPv6 bypass it. An iRED feedback
 * copy (pkt_type 3) keeps its header, which the deparser emits first.
 * No checksums here: egress rewrites nothing the checksums cover.
 * The jitter write-back mirror session of this egress pipe (BASE + pipe,
 * selected by the egress port's pipe bits) is a parser constant: computed in
 * the MAU it would need a rotated copy of the port and a stage.
 */
parser EgressParser(
        packet_in pkt,
        out egress_headers_t hdr,
        out egress_metadata_t eg_md,
        out egress_intrinsic_metadata_t eg_intr_md) {

#ifdef WITH_INT6
    /* INT over IPv6: the datagram's sum without what a hop rewrites (the
     * deparser adds the new values back: int_transit.p4) */
    Checksum() udp6_residual;
#endif

    state start {
        pkt.extract(eg_intr_md);
        eg_md.l3_end = 0;
        eg_md.l3_overrun = 0;
#ifdef WITH_QUEUE_DELAY
        eg_md.queue_delay_ns = 0;
#endif
#ifdef WITH_REROUTE
        eg_md.rr_hit = 0;
        eg_md.rr_t_q = 0;
        eg_md.rr_m = 0;
        eg_md.rr_delay = 0;
        eg_md.rr_delay_ns = 0;
        eg_md.rr_over = 0;
        eg_md.rr_run = 0;
        eg_md.rr_left = 0;
        eg_md.rr_session = 0;
        eg_md.rr_pkt_type = PKT_TYPE_REROUTE_NOTICE;
        eg_md.rr_hop_switch = 0;
        eg_md.rr_hop_port = 0;
#endif
#ifdef WITH_INT
        eg_md.int_switch_id = 0;
        eg_md.int_onset_bits = 0;
        eg_md.int_onset_cells_d = 1;
        eg_md.int_onset_ns_d = 1;
        eg_md.int_clear_cells_d = 0;
        eg_md.int_clear_ns_d = 0;
        eg_md.int_word = 0;
        eg_md.int_strip = 0;
        eg_md.int_csum = false;
        eg_md.int_sig16 = 0;
        eg_md.int_path_changed = 0;
        eg_md.int_cong_want = 2;
        eg_md.int_cong_was = 0;
        eg_md.int_interval_due = 0;
        eg_md.int_on = 0;
        eg_md.int_seq = 0;
        eg_md.int_rep_words = 0;
        eg_md.int_sink_md = 0;
        eg_md.int_sink_depth = 0;
        eg_md.int_sink_latency = 0;
#ifdef WITH_INT6
        eg_md.int_udp_res = 0;
        eg_md.int_udp6 = false;
        eg_md.int_tc6 = 0;
        eg_md.int_shim_dscp = 0;
#endif
#endif
        eg_md.rr_notice = 0;
#ifdef WITH_RTP_QUALITY
        eg_md.now_ms = 0;
        eg_md.rtp_on = 0;
        eg_md.rtp_seen = 0;
        eg_md.rtp_seq_m1 = 0;
        eg_md.rtp_loss_code = 16w0xFFFF;
        eg_md.rtp_transit = 0;
        eg_md.rtp_transit_abs_d = 0;
        eg_md.jitter_plus_8 = 0;
        eg_md.jitter_decay = 0;
        eg_md.jitter_grown = 0;
        eg_md.writeback.setInvalid();
#endif
#ifdef WITH_IRED
        eg_md.ired_mirror.setInvalid();
        eg_md.ired_on = 0;
        eg_md.ired_cur = 0;
        eg_md.ired_rand = 0;
        eg_md.ired_tail_drop = 0;
        eg_md.ired_eligible = 0;
        eg_md.ired_protect = 0;
        eg_md.ired_flag = 1;
        eg_md.ired_ewma_n = 0;
        eg_md.ired_max_len = 0;
        eg_md.ired_n_drop = 0;
        eg_md.ired_enq = 0;
        eg_md.ired_prev = 0;
        eg_md.ired_prev_decay = 0;
        eg_md.ired_cur_n = 0;
        eg_md.ired_prev_kept = 0;
        eg_md.ired_avg = 0;
        eg_md.ired_half = 0;
        eg_md.ired_min = 0;
        eg_md.ired_max = 0;
        eg_md.ired_below = 0;
        eg_md.ired_above = 0;
        eg_md.ired_room = 0;
        eg_md.ired_band = 0;
        eg_md.ired_coin = 0;
#endif
#if defined(WITH_RTP_QUALITY) || defined(WITH_IRED)
        transition select(eg_intr_md.egress_port[8:7]) {
            0 : session_pipe_0;
            1 : session_pipe_1;
            2 : session_pipe_2;
            default : session_pipe_3;   /* 3: the select covers every value */
        }
    }

    state session_pipe_0 {
#ifdef WITH_RTP_QUALITY
        eg_md.writeback_session = JITTER_WRITEBACK_SESSION_BASE + 0;
#endif
#ifdef WITH_IRED
        eg_md.ired_session = IRED_SESSION_BASE + 0;
#endif
        transition parse_pkt_type;
    }

    state session_pipe_1 {
#ifdef WITH_RTP_QUALITY
        eg_md.writeback_session = JITTER_WRITEBACK_SESSION_BASE + 1;
#endif
#ifdef WITH_IRED
        eg_md.ired_session = IRED_SESSION_BASE + 1;
#endif
        transition parse_pkt_type;
    }

    state session_pipe_2 {
#ifdef WITH_RTP_QUALITY
        eg_md.writeback_session = JITTER_WRITEBACK_SESSION_BASE + 2;
#endif
#ifdef WITH_IRED
        eg_md.ired_session = IRED_SESSION_BASE + 2;
#endif
        transition parse_pkt_type;
    }

    state session_pipe_3 {
#ifdef WITH_RTP_QUALITY
        eg_md.writeback_session = JITTER_WRITEBACK_SESSION_BASE + 3;
#endif
#ifdef WITH_IRED
        eg_md.ired_session = IRED_SESSION_BASE + 3;
#endif
        transition parse_pkt_type;
    }

    state parse_pkt_type {
#endif
        transition select(pkt.lookahead<bit<8>>()) {
            PKT_TYPE_BRIDGED : parse_bridged;
#ifdef WITH_INT
            PKT_TYPE_INT_REPORT : parse_int_report_copy;
#endif
#ifdef WITH_RTP_QUALITY
            PKT_TYPE_JITTER_WRITEBACK : parse_jitter_writeback;
#endif
#ifdef WITH_REROUTE
            PKT_TYPE_REROUTE_NOTICE : parse_reroute_mirror;
#endif
#ifdef WITH_IRED
            PKT_TYPE_IRED_FEEDBACK : parse_ired_feedback;
#endif
            default : accept;
        }
    }

#ifdef WITH_RTP_QUALITY
    /* The copy carries (leg, J') and a truncated packet nobody reads. */
    state parse_jitter_writeback {
        pkt.extract(eg_md.writeback);
        transition accept;
    }
#endif

#ifdef WITH_REROUTE
    /* A notice copy: its mirror header (extracted as the notice header, the
     * same layout), then the packet (truncated), whose Ethernet and IPv4
     * headers the notice frame keeps. */
    state parse_reroute_mirror {
        pkt.extract(hdr.reroute_notice);
        transition parse_ethernet;
    }
#endif
#ifdef WITH_INT
    /* The sink's report copy: its mirror header, then the bridged headers
     * the copy was taken with (skipped: not emitted again), then the frame,
     * which stays payload: the report carries it unchanged. */
    state parse_int_report_copy {
        pkt.extract(hdr.int_report_mirror);
        eg_md.int_sink_port = hdr.int_report_mirror.egress_port;
        pkt.advance(BRIDGED_H_BITS + INT_BRIDGED_H_BITS);   /* bridged_h + int_bridged_h */
        transition accept;
    }
#endif
#ifdef WITH_IRED
    /* iRED feedback copy on its way to the recirculation port: the header is
     * emitted again, the truncated packet behind it is payload. */
    state parse_ired_feedback {
        pkt.extract(hdr.ired_feedback);
        transition accept;
    }
#endif

    state parse_bridged {
        pkt.extract(hdr.bridged);
#ifdef WITH_INT
        pkt.extract(hdr.int_bridged);
        /* the sink port whose hop the reports carry: a packet's own (a
         * report copy's: its mirror header's); assigned once per path, as
         * Tofino's parser cannot overwrite a field */
        eg_md.int_sink_port = hdr.int_bridged.sink_port;
#endif
        transition parse_ethernet;
    }

    state parse_ethernet {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_VLAN : parse_vlan;
            ETHERTYPE_IPV4 : parse_ipv4;
#ifdef WITH_IPV6
            ETHERTYPE_IPV6 : parse_ipv6;
#endif
            default : accept;
        }
    }

    state parse_vlan {
        pkt.extract(hdr.vlan_tag);
        transition select(hdr.vlan_tag.ether_type) {
            ETHERTYPE_IPV4 : parse_ipv4;
#ifdef WITH_IPV6
            ETHERTYPE_IPV6 : parse_ipv6;
#endif
            default : accept;
        }
    }

#ifdef WITH_RTP_QUALITY
    /* Ingress dropped ihl < 5 and version != 4; ihl - 5 option words follow
     * and are extracted (so they are emitted again), not checked. */
    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        transition select(hdr.ipv4.ihl) {
#ifdef WITH_INT
            4w5 : parse_ipv4_l4_no_options;
#else
            4w5 : parse_ipv4_l4;
#endif
            4w6 : parse_ipv4_options_1;
            4w7 : parse_ipv4_options_2;
            4w8 : parse_ipv4_options_3;
            4w9 : parse_ipv4_options_4;
            4w10 : parse_ipv4_options_5;
            4w11 : parse_ipv4_options_6;
            4w12 : parse_ipv4_options_7;
            4w13 : parse_ipv4_options_8;
            4w14 : parse_ipv4_options_9;
            4w15 : parse_ipv4_options_10;
            default : accept;
        }
    }

    /* as in the ingress parser: state _n extracts word 10 - n */
    state parse_ipv4_options_10 {
        pkt.extract(hdr.ipv4_options.w0);
        transition parse_ipv4_options_9;
    }

    state parse_ipv4_options_9 {
        pkt.extract(hdr.ipv4_options.w1);
        transition parse_ipv4_options_8;
    }

    state parse_ipv4_options_8 {
        pkt.extract(hdr.ipv4_options.w2);
        transition parse_ipv4_options_7;
    }

    state parse_ipv4_options_7 {
        pkt.extract(hdr.ipv4_options.w3);
        transition parse_ipv4_options_6;
    }

    state parse_ipv4_options_6 {
        pkt.extract(hdr.ipv4_options.w4);
        transition parse_ipv4_options_5;
    }

    state parse_ipv4_options_5 {
        pkt.extract(hdr.ipv4_options.w5);
        transition parse_ipv4_options_4;
    }

    state parse_ipv4_options_4 {
        pkt.extract(hdr.ipv4_options.w6);
        transition parse_ipv4_options_3;
    }

    state parse_ipv4_options_3 {
        pkt.extract(hdr.ipv4_options.w7);
        transition parse_ipv4_options_2;
    }

    state parse_ipv4_options_2 {
        pkt.extract(hdr.ipv4_options.w8);
        transition parse_ipv4_options_1;
    }

    state parse_ipv4_options_1 {
        pkt.extract(hdr.ipv4_options.w9);
        transition parse_ipv4_l4;
    }

    state parse_ipv4_l4 {
        transition select(hdr.ipv4.flag_mf, hdr.ipv4.frag_offset, hdr.ipv4.protocol) {
            (0, 0, IP_PROTOCOLS_UDP) : parse_udp;
            default : accept;
        }
    }

#ifdef WITH_INT
    /* as the ingress parser: only a header without options may carry INT */
    state parse_ipv4_l4_no_options {
        transition select(hdr.ipv4.flag_mf, hdr.ipv4.frag_offset, hdr.ipv4.protocol,
                          hdr.ipv4.diffserv[7:2]) {
            (0, 0, IP_PROTOCOLS_UDP, INT_DSCP) : parse_udp_int;
            (0, 0, IP_PROTOCOLS_UDP, _) : parse_udp;
            default : accept;
        }
    }
#endif

#ifdef WITH_INT
    /* Ingress dropped malformed INT: shim and MD header are trusted here. A
     * transit emits them again with its hop after them (the old stack stays
     * payload); a sink skips the stack (advance: it is not emitted again). */
    state parse_udp_int {
        pkt.extract(hdr.udp);
        pkt.extract(hdr.int_shim);
        pkt.extract(hdr.int_md);
        /* rsvd = 1: Ingress chose the sink role (IntSource); the stack is
         * newest first; ds_flags bits 13..12: the second / first hop from
         * the source at/over onset (reroute's notice names it) */
        transition select(hdr.int_shim.rsvd, hdr.int_md.remaining_hop_cnt,
                          hdr.int_md.ds_flags[13:12]) {
#ifdef WITH_REROUTE
            (1, 1, 2w0b01 &&& 2w0b01) : onset_hop_1_of_1;
            (1, 0, 2w0b10 &&& 2w0b10) : onset_hop_2_of_2;
            (1, 0, 2w0b01 &&& 2w0b01) : onset_hop_1_of_2;
#endif
            (1, 1, _) : skip_int_hops_1;
            (1, 0, _) : skip_int_hops_2;
            default : accept;
        }
    }

#ifdef WITH_REROUTE
    /* the hop at/over onset: its id into metadata (not emitted), the rest
     * of the stack skipped as below */
    state onset_hop_1_of_1 {
        pkt.extract(eg_md.rr_hop);
        pkt.advance(96);
        transition accept;
    }

    state onset_hop_2_of_2 {
        pkt.extract(eg_md.rr_hop);
        pkt.advance(96 + 160);
        transition accept;
    }

    state onset_hop_1_of_2 {
        pkt.advance(160);
        pkt.extract(eg_md.rr_hop);
        pkt.advance(96);
        transition accept;
    }
#endif

    state skip_int_hops_1 {
        pkt.advance(160);
        transition accept;
    }

    state skip_int_hops_2 {
        pkt.advance(320);
        transition accept;
    }
#endif

#ifdef WITH_IPV6
    /* IPv6 (Ingress dropped other versions): UDP straight after the fixed
     * header, as the ingress parser */
    state parse_ipv6 {
        pkt.extract(hdr.ipv6);
#ifdef WITH_INT6
        /* the pseudo-header's length (UDP right after the fixed header:
         * payload_len is the UDP length) out of the residual as well: the
         * deparser adds the new payload_len back */
        udp6_residual.subtract({hdr.ipv6.payload_len});
        transition select(hdr.ipv6.next_hdr, hdr.ipv6.traffic_class[7:2]) {
            (IP_PROTOCOLS_UDP, INT_DSCP) : parse_udp6_int;
            (IP_PROTOCOLS_UDP, _) : parse_udp6;
            default : accept;
        }
#else
        transition select(hdr.ipv6.next_hdr) {
            IP_PROTOCOLS_UDP : parse_udp;
            default : accept;
        }
#endif
    }

#ifdef WITH_INT6
    /* parse_udp, and the residual a source needs: the sum without the
     * payload and UDP lengths (the checksum field's complement is the
     * datagram's sum) */
    state parse_udp6 {
        pkt.extract(hdr.udp);
        udp6_residual.subtract({hdr.udp.checksum, hdr.udp.hdr_length});
        udp6_residual.subtract_all_and_deposit(eg_md.int_udp_res);
        transition select(hdr.udp.hdr_length, pkt.lookahead<bit<2>>()) {
            (16w0x0000 &&& 16w0xfff0, _) : accept;   /* 0..15  */
            (16w0x0010 &&& 16w0xfffc, _) : accept;   /* 16..19 */
            (_, 2w2) : parse_rtp;
            default : accept;
        }
    }

    /* parse_udp_int over IPv6, and the residual a transit needs: the sum
     * without the payload and UDP lengths, shim and MD header (it rewrites
     * them) */
    state parse_udp6_int {
        pkt.extract(hdr.udp);
        pkt.extract(hdr.int_shim);
        pkt.extract(hdr.int_md);
        udp6_residual.subtract({hdr.udp.checksum, hdr.udp.hdr_length});
        udp6_residual.subtract({
            hdr.int_shim.int_type, hdr.int_shim.npt, hdr.int_shim.rsvd,
            hdr.int_shim.len, hdr.int_shim.rsvd2, hdr.int_shim.dscp,
            hdr.int_shim.rsvd3});
        udp6_residual.subtract({
            hdr.int_md.ver, hdr.int_md.d, hdr.int_md.e, hdr.int_md.m,
            hdr.int_md.rsvd, hdr.int_md.hop_ml, hdr.int_md.remaining_hop_cnt,
            hdr.int_md.instruction_bitmap, hdr.int_md.ds_id,
            hdr.int_md.ds_instruction, hdr.int_md.ds_flags});
        udp6_residual.subtract_all_and_deposit(eg_md.int_udp_res);
        /* parse_udp_int's branches */
        transition select(hdr.int_shim.rsvd, hdr.int_md.remaining_hop_cnt,
                          hdr.int_md.ds_flags[13:12]) {
#ifdef WITH_REROUTE
            (1, 1, 2w0b01 &&& 2w0b01) : onset_hop_1_of_1;
            (1, 0, 2w0b10 &&& 2w0b10) : onset_hop_2_of_2;
            (1, 0, 2w0b01 &&& 2w0b01) : onset_hop_1_of_2;
#endif
            (1, 1, _) : skip_int_hops_1;
            (1, 0, _) : skip_int_hops_2;
            default : accept;
        }
    }
#endif
#endif

    state parse_udp {
        pkt.extract(hdr.udp);
        /* the ingress parser's rule: UDP length >= 20 and version 2 */
        transition select(hdr.udp.hdr_length, pkt.lookahead<bit<2>>()) {
            (16w0x0000 &&& 16w0xfff0, _) : accept;   /* 0..15  */
            (16w0x0010 &&& 16w0xfffc, _) : accept;   /* 16..19 */
            (_, 2w2) : parse_rtp;
            default : accept;
        }
    }

    state parse_rtp {
        pkt.extract(hdr.rtp);
        transition accept;
    }
#else
    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        transition accept;
    }

#ifdef WITH_IPV6
    state parse_ipv6 {
        pkt.extract(hdr.ipv6);
        transition accept;
    }
#endif
#endif
}
