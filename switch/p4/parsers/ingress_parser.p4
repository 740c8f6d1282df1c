/* p4relay — ingress parser.
 *
 * Ethernet, optional 802.1Q, IPv4 (options as up to ten 32-bit words), UDP,
 * RTP v2 fixed header.
 * Checksums (Tofino computes them only in parser and deparser; the ingress
 * parser of Tofino 1 has two checksum units, both used here):
 *  - IPv4: verified here, options included. The deparser recomputes the
 *    header checksum over the header and its option words.
 *  - UDP: residual without the pseudo-header addresses and both ports; the
 *    deparser adds the rewritten values back (incremental, RFC 1624).
 * The bridged header is made valid here with its constants (pkt_type, no
 * relay hit): constants written by the parser cost no MAU stage, and the
 * relay_leg action then writes only its own fields of it.
 */
/* Tofino 2: the INT states stay states of their own. Merged into the state
 * before them, the open-source compiler (9.13.4) loses the well-formed INT
 * branch when it lowers the parser (and its assembler then fails on the
 * INT headers' CLOTs). */
#if __TARGET_TOFINO__ == 2
#define T2_OWN_STATE @dontmerge("ingress")
#else
#define T2_OWN_STATE
#endif

parser IngressParser(
        packet_in pkt,
        out ingress_headers_t hdr,
        out ingress_metadata_t ig_md,
        out ingress_intrinsic_metadata_t ig_intr_md) {

    Checksum() ipv4_verify;
    Checksum() udp_residual;

    state start {
        pkt.extract(ig_intr_md);
        ig_md.ipv4_checksum_err = false;
        ig_md.ipv4_malformed = false;
        ig_md.ipv6_malformed = false;
        ig_md.icmp6_ndp = false;
        ig_md.relay6_dst = false;
        ig_md.relay_id = 0;
        ig_md.relay6_hit = false;
        ig_md.guard6_hit = false;
        ig_md.leg6 = 0;
        ig_md.rtcp6_port_offset = 0;
        ig_md.udp_csum_residual = 0;
        ig_md.udp_csum_update = false;
        ig_md.l4_src_port = 0;
        ig_md.l4_dst_port = 0;
        ig_md.nexthop_id = 0;
        ig_md.forwarded = false;
        ig_md.ingress_port = ig_intr_md.ingress_port;
        ig_md.relay_dst = false;
        ig_md.relay_hit = false;
        ig_md.guard_hit = false;
        ig_md.guard_leg = 0;
        ig_md.guard_drop = false;
        ig_md.leg = 0;
        ig_md.rtcp_port_offset = 0;
        ig_md.now_ms = 0;
#ifdef WITH_IRED
        ig_md.ired_flag = 0;
        ig_md.ired_protected = false;
        ig_md.dscp = 0;
        ig_md.ired_sip = false;
#endif
        hdr.bridged.setValid();
        hdr.bridged.pkt_type = PKT_TYPE_BRIDGED;
        hdr.bridged.relay = 0;
        hdr.bridged.rtcp = 0;
        hdr.bridged._pad = 0;
        hdr.bridged.leg = 0;
#ifdef WITH_REROUTE
        hdr.bridged.rr_detect = 0;
        hdr.bridged._rr_pad = 0;
        hdr.bridged.rr_class = 0;
        hdr.bridged.rr_slot = 0;
        hdr.bridged.rr_int = 0;
        hdr.bridged._rr_pad2 = 0;
        hdr.bridged.rr_ingress_port = ig_intr_md.ingress_port;
        hdr.bridged.rr_ingress_ts = ig_intr_md.ingress_mac_tstamp[47:16];
        ig_md.rr_has_backup = false;
        ig_md.rr_slot = 0;
        ig_md.rr_backup = 0;
        ig_md.rr_primary_port = 0;
        ig_md.rr_active = 0;
        ig_md.rr_kind = 0;
        ig_md.rr_moved_from = 1;
        ig_md.rr_upstream = false;
#if __TARGET_TOFINO__ == 2
        ig_md.rr_from_port = 0;
#endif
#endif
#ifdef WITH_INT
        ig_md.int_malformed = false;
        ig_md.int_mirror_session = 0;
        hdr.int_bridged.setValid();
        hdr.int_bridged.source = 0;
        hdr.int_bridged.transit = 0;
        hdr.int_bridged.sink = 0;
        hdr.int_bridged._pad = 0;
        hdr.int_bridged._pad2 = 0;
        hdr.int_bridged.sink_port = 0;
        hdr.int_bridged.ingress_port = 0;   /* IntSource deposits the port */
#endif
        /* bound unless the port's metadata says otherwise (port_unbound) */
        ig_md.bound_port = ig_intr_md.ingress_port;
        /* nothing is resubmitted: every packet starts with port metadata.
         * The port is matched here, where it is extracted: a match in a
         * later state on it would need the bytes kept back in the parser's
         * buffer (Tofino 2's port metadata is too long for that). */
#ifdef WITH_IRED
        transition select(ig_intr_md.ingress_port[6:0]) {
            RECIRC_PORT_LOCAL : parse_recirc;
            default : parse_port_metadata;
        }
#else
        transition parse_port_metadata;
#endif
    }

#ifdef WITH_IRED
    /* a recirculation port (no front-panel port has that local number):
     * an iRED feedback copy, recognised by its first byte after the port
     * metadata, or a packet parsed as on any other port */
    state parse_recirc {
        transition select(pkt.lookahead<bit<PORT_METADATA_BITS + 8>>()[7:0]) {
            PKT_TYPE_IRED_FEEDBACK : parse_ired_feedback;
            default : parse_port_metadata;
        }
    }

    state parse_ired_feedback {
        pkt.advance(PORT_METADATA_SIZE);
        ig_md.port_binding.unbound = 0;
        pkt.extract(hdr.ired_feedback);
        transition accept;
    }
#endif

    /* Port binding: the port's phase-0 data (pipe.IngressParser.$PORT_METADATA,
     * written by the control plane per port; a port without an entry reads
     * 0, i.e. bound) says what relay keys on. Bound: the ingress port, so a
     * leg matches only where its party's packets arrive. Unbound (the
     * operator's opt-out for asymmetric routing): UNBOUND_PORT, so an entry
     * installed with it matches the flow from every unbound port. Decided
     * here, at no MAU stage. */
    state parse_port_metadata {
        ig_md.port_binding = port_metadata_unpack<port_binding_t>(pkt);
        transition select(ig_md.port_binding.unbound) {
            1 : port_unbound;
            default : parse_ethernet;
        }
    }

    state port_unbound {
        ig_md.bound_port = UNBOUND_PORT;
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
#ifdef WITH_REROUTE
            ETHERTYPE_REROUTE_NOTICE : parse_reroute_notice;
#endif
            default : accept;
        }
    }

#ifdef WITH_REROUTE
    /* a congestion notice: its header, then the flow's packet's IPv4 or
     * IPv6 header (the version nibble tells them apart) */
    state parse_reroute_notice {
        pkt.extract(hdr.reroute_notice);
#ifdef WITH_IPV6
        transition select(pkt.lookahead<bit<4>>()) {
            6 : parse_ipv6;
            default : parse_ipv4;
        }
#else
        transition parse_ipv4;
#endif
    }
#endif
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

#ifdef WITH_IPV6
    /* IPv6: the UDP residual leaves out the addresses as for IPv4 (the
     * pseudo-header's length and next header stay in it: the checksum the
     * packet carries covers them). No extension headers: UDP or ICMPv6 must
     * follow the fixed header directly, anything else is routed as it is. */
    state parse_ipv6 {
        pkt.extract(hdr.ipv6);
        udp_residual.subtract({hdr.ipv6.src_addr, hdr.ipv6.dst_addr});
#ifdef WITH_INT6
        /* DSCP INT_DSCP in the traffic class: INT-MD follows UDP, as for
         * IPv4 (the stack keeps the UDP checksum valid over IPv6) */
        transition select(hdr.ipv6.version, hdr.ipv6.next_hdr, hdr.ipv6.traffic_class[7:2]) {
            (4w6, IP_PROTOCOLS_UDP, INT_DSCP) : parse_udp_int;
            (4w6, IP_PROTOCOLS_UDP, _) : parse_udp;
            (4w6, IP_PROTOCOLS_ICMPV6, _) : parse_icmpv6;
            (4w6, _, _) : accept;
            default : parse_ipv6_malformed;
        }
#else
        transition select(hdr.ipv6.version, hdr.ipv6.next_hdr) {
            (4w6, IP_PROTOCOLS_UDP) : parse_udp;
            (4w6, IP_PROTOCOLS_ICMPV6) : parse_icmpv6;
            (4w6, _) : accept;
            default : parse_ipv6_malformed;
        }
#endif
    }

    state parse_ipv6_malformed {
        ig_md.ipv6_malformed = true;
        transition accept;
    }

    /* NDP (133 RS, 134 RA, 135 NS, 136 NA, 137 redirect) and MLD (130-132,
     * 143) go to the CPU port wherever they are addressed, as ARP: the
     * switch's Linux side answers them. Other ICMPv6 (echo, errors) is
     * routed like any packet. */
    state parse_icmpv6 {
        pkt.extract(hdr.icmpv6);
        transition select(hdr.icmpv6.type) {
            8w130 &&& 8w0xfe : icmpv6_ndp;   /* 130, 131 */
            8w132 &&& 8w0xfc : icmpv6_ndp;   /* 132..135 */
            8w136 &&& 8w0xfe : icmpv6_ndp;   /* 136, 137 */
            8w143 : icmpv6_ndp;
            default : accept;
        }
    }

    state icmpv6_ndp {
        ig_md.icmp6_ndp = true;
        transition accept;
    }
#endif

    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        ipv4_verify.add(hdr.ipv4);
        udp_residual.subtract({hdr.ipv4.src_addr, hdr.ipv4.dst_addr});

        /* version 4 and ihl >= 5; anything else is malformed and dropped */
        transition select(hdr.ipv4.version, hdr.ipv4.ihl) {
#ifdef WITH_INT
            (4w4, 4w5) : parse_ipv4_l4_no_options;
#else
            (4w4, 4w5) : parse_ipv4_l4;
#endif
            (4w4, 4w6) : parse_ipv4_options_1;
            (4w4, 4w7) : parse_ipv4_options_2;
            (4w4, 4w8) : parse_ipv4_options_3;
            (4w4, 4w9) : parse_ipv4_options_4;
            (4w4, 4w10) : parse_ipv4_options_5;
            (4w4, 4w11) : parse_ipv4_options_6;
            (4w4, 4w12) : parse_ipv4_options_7;
            (4w4, 4w13) : parse_ipv4_options_8;
            (4w4, 4w14) : parse_ipv4_options_9;
            (4w4, 4w15) : parse_ipv4_options_10;
            default : parse_ipv4_malformed;
        }
    }

    /* ihl - 5 option words: state _n extracts word 10 - n, so ihl = 6 fills
     * w9 only and ihl = 15 fills w0..w9; emitted in w0..w9 order, i.e. in
     * packet order. */
    state parse_ipv4_options_10 {
        pkt.extract(hdr.ipv4_options.w0);
        ipv4_verify.add(hdr.ipv4_options.w0);
        transition parse_ipv4_options_9;
    }

    state parse_ipv4_options_9 {
        pkt.extract(hdr.ipv4_options.w1);
        ipv4_verify.add(hdr.ipv4_options.w1);
        transition parse_ipv4_options_8;
    }

    state parse_ipv4_options_8 {
        pkt.extract(hdr.ipv4_options.w2);
        ipv4_verify.add(hdr.ipv4_options.w2);
        transition parse_ipv4_options_7;
    }

    state parse_ipv4_options_7 {
        pkt.extract(hdr.ipv4_options.w3);
        ipv4_verify.add(hdr.ipv4_options.w3);
        transition parse_ipv4_options_6;
    }

    state parse_ipv4_options_6 {
        pkt.extract(hdr.ipv4_options.w4);
        ipv4_verify.add(hdr.ipv4_options.w4);
        transition parse_ipv4_options_5;
    }

    state parse_ipv4_options_5 {
        pkt.extract(hdr.ipv4_options.w5);
        ipv4_verify.add(hdr.ipv4_options.w5);
        transition parse_ipv4_options_4;
    }

    state parse_ipv4_options_4 {
        pkt.extract(hdr.ipv4_options.w6);
        ipv4_verify.add(hdr.ipv4_options.w6);
        transition parse_ipv4_options_3;
    }

    state parse_ipv4_options_3 {
        pkt.extract(hdr.ipv4_options.w7);
        ipv4_verify.add(hdr.ipv4_options.w7);
        transition parse_ipv4_options_2;
    }

    state parse_ipv4_options_2 {
        pkt.extract(hdr.ipv4_options.w8);
        ipv4_verify.add(hdr.ipv4_options.w8);
        transition parse_ipv4_options_1;
    }

    state parse_ipv4_options_1 {
        pkt.extract(hdr.ipv4_options.w9);
        ipv4_verify.add(hdr.ipv4_options.w9);
        transition parse_ipv4_l4;
    }

    state parse_ipv4_malformed {
        ig_md.ipv4_malformed = true;
        transition accept;
    }

    state parse_ipv4_l4 {
        /* verify() is true when the checksum does NOT verify (as used by
         * fabric-tna and Intel's tna_checksum). */
        ig_md.ipv4_checksum_err = ipv4_verify.verify();
        /* Fragments are never relayed: later fragments carry no UDP header. */
        transition select(hdr.ipv4.flag_mf, hdr.ipv4.frag_offset, hdr.ipv4.protocol) {
            (0, 0, IP_PROTOCOLS_UDP) : parse_udp;
            default : accept;
        }
    }

#ifdef WITH_INT
    /* parse_ipv4_l4 for a header without options; DSCP INT_DSCP here means
     * INT-MD follows the UDP header (INT packets carry no IPv4 options) */
    state parse_ipv4_l4_no_options {
        ig_md.ipv4_checksum_err = ipv4_verify.verify();
        transition select(hdr.ipv4.flag_mf, hdr.ipv4.frag_offset, hdr.ipv4.protocol,
                          hdr.ipv4.diffserv[7:2]) {
            (0, 0, IP_PROTOCOLS_UDP, INT_DSCP) : parse_udp_int;
            (0, 0, IP_PROTOCOLS_UDP, _) : parse_udp;
            default : accept;
        }
    }
#endif

#ifdef WITH_INT
    /* UDP as in parse_udp (over IPv4 the checksum is 0 while INT is on
     * board; the residual is kept the same way), then the INT shim and MD
     * header. The hop stack is not parsed in Ingress. */
    T2_OWN_STATE
    state parse_udp_int {
        pkt.extract(hdr.udp);
        udp_residual.subtract({hdr.udp.checksum});
        udp_residual.subtract({hdr.udp.src_port, hdr.udp.dst_port});
        udp_residual.subtract_all_and_deposit(ig_md.udp_csum_residual);
        transition select(hdr.udp.hdr_length) {
            16w0x0000 &&& 16w0xffe0 : parse_int_malformed;   /* < 32: no shim + MD */
            default : parse_int_shim;
        }
    }

    /* Well-formed: INT-MD, version 2, 5-word hops, our instructions, and 1
     * or 2 hops with shim length and remaining hop count agreeing (4 + 5h
     * words, INT_MAX_HOPS - h remaining). Each state matches only bytes in
     * its own window (the MD version by lookahead from the shim's state):
     * 4 bytes of match registers, and no match on a field of an earlier
     * state, which Tofino 2's compiler would have to keep in the buffer. */
    T2_OWN_STATE
    state parse_int_shim {
        pkt.extract(hdr.int_shim);
        transition select(hdr.int_shim.int_type, hdr.int_shim.npt, hdr.int_shim.len,
                          pkt.lookahead<bit<4>>()) {
            (INT_TYPE_MD, 0, 9, INT_VERSION) : parse_int_md_1;
            (INT_TYPE_MD, 0, 14, INT_VERSION) : parse_int_md_2;
            default : parse_int_malformed;
        }
    }

    state parse_int_md_1 {
        pkt.extract(hdr.int_md);
        transition select(hdr.int_md.remaining_hop_cnt, hdr.int_md.hop_ml,
                          hdr.int_md.instruction_bitmap) {
            (1, INT_HOP_WORDS, INT_INSTRUCTIONS) : accept;
            default : parse_int_malformed;
        }
    }

    state parse_int_md_2 {
        pkt.extract(hdr.int_md);
        transition select(hdr.int_md.remaining_hop_cnt, hdr.int_md.hop_ml,
                          hdr.int_md.instruction_bitmap) {
            (0, INT_HOP_WORDS, INT_INSTRUCTIONS) : accept;
            default : parse_int_malformed;
        }
    }

    T2_OWN_STATE
    state parse_int_malformed {
        ig_md.int_malformed = true;
        transition accept;
    }
#endif

    state parse_udp {
        pkt.extract(hdr.udp);
        ig_md.l4_src_port = hdr.udp.src_port;
        ig_md.l4_dst_port = hdr.udp.dst_port;
        udp_residual.subtract({hdr.udp.checksum});
        udp_residual.subtract({hdr.udp.src_port, hdr.udp.dst_port});
        udp_residual.subtract_all_and_deposit(ig_md.udp_csum_residual);
        /* RTP fixed header only when the UDP length leaves room for it
         * (>= 8 + 12 bytes) and the version field reads 2. Which ports are
         * relay ports is decided by relay_addr at run time, not here. */
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
}
