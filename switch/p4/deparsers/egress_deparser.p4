/* p4relay — egress deparser: strips the bridged header (it is never
 * emitted) and sends the jitter write-back copy (E2E mirror) RtpQuality asked
 * for, or iRED's feedback copy (Ired); headers otherwise go out as ingress
 * left them. A feedback copy's own pass emits its header first. */
control EgressDeparser(
        packet_out pkt,
        inout egress_headers_t hdr,
        in egress_metadata_t eg_md,
        in egress_intrinsic_metadata_for_deparser_t eg_dprsr_md) {

#if defined(WITH_RTP_QUALITY) || defined(WITH_IRED)
    Mirror() mirror;
#endif
#ifdef WITH_INT
    Checksum() ipv4_checksum;
    Checksum() report_checksum;
#ifdef WITH_INT6
    Checksum() udp6_checksum;
#endif
#endif

    apply {
#ifdef WITH_RTP_QUALITY
        if (eg_dprsr_md.mirror_type == MIRROR_TYPE_JITTER_WRITEBACK) {
            mirror.emit<jitter_writeback_h>(eg_md.writeback_session, {
                eg_md.writeback.pkt_type,
                eg_md.writeback._pad,
                eg_md.writeback.leg,
                eg_md.writeback.jitter
            });
        }
#endif
#ifdef WITH_REROUTE
        if (eg_dprsr_md.mirror_type == MIRROR_TYPE_REROUTE_NOTICE) {
            /* reroute_mirror_h, from the fields where they are */
            mirror.emit<reroute_mirror_h>(eg_md.rr_session, {
                eg_md.rr_pkt_type,
                hdr.bridged.rr_class,
                hdr.bridged.rr_int,
                hdr.bridged._rr_pad2,
                hdr.bridged.rr_ingress_port,
                hdr.bridged.rr_slot,
                eg_md.rr_run,
                eg_md.rr_delay_ns,
                eg_md.rr_hop_switch,
                eg_md.rr_hop_port
            });
        }
#endif
#ifdef WITH_INT
        /* INT changed DSCP and total_len (source, transit, sink) */
        if (eg_md.int_csum) {
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
        }
#ifdef WITH_INT6
        /* INT over IPv6 (IntTransit's int_udp6): the parser's residual (the
         * sum without the payload length, UDP length, shim and MD header it
         * found) plus their new values and this hop; headers a packet does
         * not have count as 0. A result of 0 is sent as 0xffff (RFC 8200
         * 8.1). */
        if (eg_md.int_udp6) {
            hdr.udp.checksum = udp6_checksum.update(data = {
                hdr.udp.hdr_length,
                hdr.int_shim.int_type,
                hdr.int_shim.npt,
                hdr.int_shim.rsvd,
                hdr.int_shim.len,
                hdr.int_shim.rsvd2,
                hdr.int_shim.dscp,
                hdr.int_shim.rsvd3,
                hdr.int_md.ver,
                hdr.int_md.d,
                hdr.int_md.e,
                hdr.int_md.m,
                hdr.int_md.rsvd,
                hdr.int_md.hop_ml,
                hdr.int_md.remaining_hop_cnt,
                hdr.int_md.instruction_bitmap,
                hdr.int_md.ds_id,
                hdr.int_md.ds_instruction,
                hdr.int_md.ds_flags,
                hdr.int_hop.switch_id,
                hdr.int_hop.ingress_port,
                hdr.int_hop.egress_port,
                hdr.int_hop.hop_latency,
                hdr.int_hop.queue_id,
                hdr.int_hop.queue_occupancy,
                hdr.int_hop.tx_bytes,
                hdr.ipv6.payload_len,
                eg_md.int_udp_res
            }, zeros_as_ones = true);
        }
#endif
        if (hdr.report_ipv4.isValid()) {
            hdr.report_ipv4.hdr_checksum = report_checksum.update({
                hdr.report_ipv4.version,
                hdr.report_ipv4.ihl,
                hdr.report_ipv4.diffserv,
                hdr.report_ipv4.total_len,
                hdr.report_ipv4.identification,
                hdr.report_ipv4.flag_reserved,
                hdr.report_ipv4.flag_df,
                hdr.report_ipv4.flag_mf,
                hdr.report_ipv4.frag_offset,
                hdr.report_ipv4.ttl,
                hdr.report_ipv4.protocol,
                hdr.report_ipv4.src_addr,
                hdr.report_ipv4.dst_addr
            });
        }
        pkt.emit(hdr.report_ethernet);
        pkt.emit(hdr.report_ipv4);
        pkt.emit(hdr.report_udp);
        pkt.emit(hdr.report_group);
        pkt.emit(hdr.report_individual);
        pkt.emit(hdr.report_sink_md);
#endif
#ifdef WITH_IRED
        if (eg_dprsr_md.mirror_type == MIRROR_TYPE_IRED) {
            mirror.emit<ired_feedback_h>(eg_md.ired_session, {
                eg_md.ired_mirror.pkt_type,
                eg_md.ired_mirror._pad,
                eg_md.ired_mirror.port,
                eg_md.ired_mirror.flag
            });
        }
        pkt.emit(hdr.ired_feedback);
#endif
        pkt.emit(hdr.ethernet);
#ifdef WITH_REROUTE
        pkt.emit(hdr.reroute_notice);
#endif
        pkt.emit(hdr.vlan_tag);
        pkt.emit(hdr.ipv4);
        pkt.emit(hdr.ipv4_options);
        pkt.emit(hdr.ipv6);
        pkt.emit(hdr.udp);
#ifdef WITH_INT
        pkt.emit(hdr.int_shim);
        pkt.emit(hdr.int_md);
        pkt.emit(hdr.int_hop);
#endif
        pkt.emit(hdr.rtp);
    }
}
