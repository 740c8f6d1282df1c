/* p4relay — ingress deparser: checksums, learning digest; the bridged header
 * goes out first (it is the first member of ingress_headers_t). */
control IngressDeparser(
        packet_out pkt,
        inout ingress_headers_t hdr,
        in ingress_metadata_t ig_md,
        in ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md) {

    Checksum() ipv4_checksum;
    Checksum() udp_checksum;
    Digest<learn_digest_t>() learn;
#ifdef WITH_IPV6
    Digest<learn6_digest_t>() learn6;
#endif
#ifdef WITH_REROUTE
    Digest<reroute_digest_t>() reroute;
#endif
#ifdef WITH_INT
    Mirror() mirror;
#endif

    apply {
        /* The whole header again, option words included (the words of
         * options the packet does not have are not valid and count as 0).
         * Every IPv4 packet that leaves ingress has a new TTL (Forwarding),
         * so it is always written: a conditional update would cost MAU
         * stages at the end of the pipe. */
        hdr.ipv4.hdr_checksum = ipv4_checksum.update({
            hdr.ipv4.version,
            hdr.ipv4.ihl,
            hdr.ipv4.diffserv,
            hdr.ipv4.total_len,
            hdr.ipv4.identification,
            hdr.ipv4.flag_reserved,
            hdr.ipv4.flag_df,
            hdr.ipv4.flag_mf,
            hdr.ipv4.frag_offset,
            hdr.ipv4.ttl,
            hdr.ipv4.protocol,
            hdr.ipv4.src_addr,
            hdr.ipv4.dst_addr,
            hdr.ipv4_options.w0.data,
            hdr.ipv4_options.w1.data,
            hdr.ipv4_options.w2.data,
            hdr.ipv4_options.w3.data,
            hdr.ipv4_options.w4.data,
            hdr.ipv4_options.w5.data,
            hdr.ipv4_options.w6.data,
            hdr.ipv4_options.w7.data,
            hdr.ipv4_options.w8.data,
            hdr.ipv4_options.w9.data
        });

        if (ig_md.udp_csum_update) {
            /* Only set when the packet carried a checksum: over IPv4 zero
             * stays zero, over IPv6 it is never relayed. A result of 0 is
             * sent as 0xffff (RFC 768, RFC 8200 8.1). One update for both
             * families: the fields of the header a packet does not have are
             * not valid and count as 0. */
            hdr.udp.checksum = udp_checksum.update(data = {
                hdr.ipv4.src_addr,
                hdr.ipv4.dst_addr,
                hdr.ipv6.src_addr,
                hdr.ipv6.dst_addr,
                hdr.udp.src_port,
                hdr.udp.dst_port,
                ig_md.udp_csum_residual
            }, zeros_as_ones = true);
        }

        if (ig_dprsr_md.digest_type == DIGEST_TYPE_LEARN) {
            learn.pack({
                hdr.ipv4.src_addr,
                hdr.ipv4.dst_addr,
                hdr.udp.src_port,
                hdr.udp.dst_port,
                ig_md.ingress_port
            });
        }

#ifdef WITH_IPV6
        if (ig_dprsr_md.digest_type == DIGEST_TYPE_LEARN6) {
            learn6.pack({
                hdr.ipv6.src_addr,
                hdr.ipv6.dst_addr,
                hdr.udp.src_port,
                hdr.udp.dst_port,
                ig_md.ingress_port
            });
        }
#endif

#ifdef WITH_REROUTE
        if (ig_dprsr_md.digest_type == DIGEST_TYPE_REROUTE) {
            reroute.pack({
                hdr.ipv4.dst_addr,
                ig_md.rr_slot,
                ig_md.rr_kind,
                hdr.reroute_notice.port,
                hdr.reroute_notice.queue_delay_ns,
                hdr.reroute_notice.run,
                hdr.reroute_notice.flow_class,
                hdr.reroute_notice.from_int,
                hdr.reroute_notice.hop_switch_id,
                hdr.reroute_notice.hop_port
            });
        }
#endif
#ifdef WITH_INT
        /* the sink's report copy (IntSource): the packet as it leaves
         * here, INT on board, after its mirror header */
        if (ig_dprsr_md.mirror_type == MIRROR_TYPE_INT_REPORT) {
            mirror.emit<int_report_mirror_h>(ig_md.int_mirror_session, {
                ig_md.int_mirror.pkt_type,
                ig_md.int_mirror.flow_slot,
                ig_md.int_mirror.ds_flags,
                ig_md.int_mirror.frame_len,
                ig_md.int_mirror._pad,
                ig_md.int_mirror._pad2,
                ig_md.int_mirror.ingress_port,
                ig_md.int_mirror._pad3,
                ig_md.int_mirror.egress_port
            });
        }
#endif
        pkt.emit(hdr);
    }
}
