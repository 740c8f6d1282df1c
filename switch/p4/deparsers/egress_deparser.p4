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
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.vlan_tag);
        pkt.emit(hdr.ipv4);
        pkt.emit(hdr.ipv4_options);
        pkt.emit(hdr.udp);
        pkt.emit(hdr.rtp);
    }
}
