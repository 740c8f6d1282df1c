/* p4relay — ingress parser.
 *
 * Ethernet, optional 802.1Q, IPv4, UDP, RTP v2 fixed header.
 * Checksums (Tofino computes them only in parser and deparser):
 *  - IPv4: verified here for ihl == 5; for every IPv4 packet the residual
 *    (header sum without TTL/protocol and the two addresses) is deposited so
 *    the deparser writes a correct checksum after TTL and address rewrites,
 *    options included, without parsing the options.
 *  - UDP: residual without the pseudo-header addresses and both ports; the
 *    deparser adds the rewritten values back (incremental, RFC 1624).
 */
parser IngressParser(
        packet_in pkt,
        out ingress_headers_t hdr,
        out ingress_metadata_t ig_md,
        out ingress_intrinsic_metadata_t ig_intr_md) {

    Checksum() ipv4_verify;
    Checksum() ipv4_residual;
    Checksum() udp_residual;

    state start {
        pkt.extract(ig_intr_md);
        ig_md.ipv4_checksum_err = false;
        ig_md.ipv4_malformed = false;
        ig_md.ipv4_csum_residual = 0;
        ig_md.udp_csum_residual = 0;
        ig_md.udp_csum_update = false;
        ig_md.ipv4_csum_update = false;
        ig_md.relay_dst = false;
        ig_md.relay_hit = false;
        ig_md.leg = 0;
        ig_md.rtcp = 0;
        ig_md.rtcp_port_offset = 0;
        ig_md.nexthop_id = 0;
        transition select(ig_intr_md.resubmit_flag) {
            0 : parse_port_metadata;
            1 : parse_resubmit;
        }
    }

    state parse_port_metadata {
        pkt.advance(PORT_METADATA_SIZE);
        transition parse_ethernet;
    }

    /* Second pass of an RTP packet whose jitter was computed in the first. */
    state parse_resubmit {
        pkt.extract(ig_md.resubmit);
        transition parse_ethernet;
    }

    state parse_ethernet {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_VLAN : parse_vlan;
            ETHERTYPE_IPV4 : parse_ipv4;
            default : accept;
        }
    }

    state parse_vlan {
        pkt.extract(hdr.vlan_tag);
        transition select(hdr.vlan_tag.ether_type) {
            ETHERTYPE_IPV4 : parse_ipv4;
            default : accept;
        }
    }

    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        ipv4_verify.add(hdr.ipv4);

        /* Subtracting the checksum field leaves the sum of all header words
         * (options included); then take out the words the pipeline rewrites. */
        ipv4_residual.subtract({hdr.ipv4.hdr_checksum});
        ipv4_residual.subtract({hdr.ipv4.ttl, hdr.ipv4.protocol});
        ipv4_residual.subtract({hdr.ipv4.src_addr, hdr.ipv4.dst_addr});
        ig_md.ipv4_csum_residual = ipv4_residual.get();

        udp_residual.subtract({hdr.ipv4.src_addr, hdr.ipv4.dst_addr});

        transition select(hdr.ipv4.ihl) {
            4w5 : parse_ipv4_no_options;
            4w0 &&& 4w0xc : parse_ipv4_malformed;   /* 0..3 */
            4w4 : parse_ipv4_malformed;
            default : accept;                   /* options: routed, not relayed */
        }
    }

    state parse_ipv4_malformed {
        ig_md.ipv4_malformed = true;
        transition accept;
    }

    state parse_ipv4_no_options {
        /* verify() is true when the checksum does NOT verify (as used by
         * fabric-tna and Intel's tna_checksum). */
        ig_md.ipv4_checksum_err = ipv4_verify.verify();
        /* Fragments are never relayed: later fragments carry no UDP header. */
        transition select(hdr.ipv4.flag_mf, hdr.ipv4.frag_offset, hdr.ipv4.protocol) {
            (0, 0, IP_PROTOCOLS_UDP) : parse_udp;
            default : accept;
        }
    }

    state parse_udp {
        pkt.extract(hdr.udp);
        udp_residual.subtract({hdr.udp.checksum});
        udp_residual.subtract({hdr.udp.src_port, hdr.udp.dst_port});
        ig_md.udp_csum_residual = udp_residual.get();
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
