/* p4relay — egress deparser: strips the bridged header (it is never
 * emitted) and sends the jitter write-back copy (E2E mirror) RtpQuality asked
 * for; headers otherwise go out as ingress left them. */
control EgressDeparser(
        packet_out pkt,
        inout egress_headers_t hdr,
        in egress_metadata_t eg_md,
        in egress_intrinsic_metadata_for_deparser_t eg_dprsr_md) {

#ifdef WITH_RTP_QUALITY
    Mirror() mirror;
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
                hdr.bridged._rr_pad2,
                hdr.bridged.rr_ingress_port,
                hdr.bridged.rr_slot,
                eg_md.rr_run,
                eg_md.queue_delay_ns
            });
        }
#endif
        pkt.emit(hdr.ethernet);
#ifdef WITH_REROUTE
        pkt.emit(hdr.reroute_notice);
#endif
        pkt.emit(hdr.vlan_tag);
        pkt.emit(hdr.ipv4);
        pkt.emit(hdr.ipv4_options);
        pkt.emit(hdr.udp);
        pkt.emit(hdr.rtp);
    }
}
