/* p4relay — egress: what happens after the queue.
 *
 * 1. Length check: drop IPv4 packets whose total_len claims more bytes than
 *    the frame has. Tofino 1 knows the packet length only here
 *    (eg_intr_md.pkt_length, the packet as it entered: the bridged header is
 *    not counted). pkt_length is compared without subtracting an FCS: if the
 *    hardware counts the 4 FCS bytes, an overrun of up to 4 bytes passes
 *    (README "Not verified").
 * 2. RtpQuality for relayed RTP of an offloaded leg (leg and rtcp bit bridged
 *    from Ingress), timed by the egress global timestamp, i.e. at departure.
 *    Its jitter write-back copies (E2E mirror) come back here and are dropped
 *    after writing.
 * iRED (queue management) and INT (telemetry) will live here too.
 *
 * Dependency chain (MAU stages, estimated; README "Resources"):
 *   clock slices -> 2 adds -> transit -> rtp_transit -> |D| -> J + |D|
 *     -> J' = (J + |D|) - ((J + 8) >> 4)                                  (7)
 *   rtp_packets -> rtp_max_seq -> sort delta -> rtp_lost / rtp_reordered (4)
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

    bit<16> l3_len;
    bit<16> room;
    bool    measure;

    /* RtpQuality is applied at one place only (it holds the registers; a
     * second apply would be a second copy of them): for a relayed RTP packet
     * that passed the length check, and for a write-back copy. */
    apply {
        measure = false;
        if (hdr.ipv4.isValid()) {
            l3_len = eg_intr_md.pkt_length - 14;
            if (hdr.vlan_tag.isValid()) {
                l3_len = l3_len - 4;
            }
            /* negative room (bit 15 set) = total_len > bytes present */
            room = l3_len - hdr.ipv4.total_len;
            if (room[15:15] == 1) {
                eg_dprsr_md.drop_ctl = 1;
            }
#ifdef WITH_RTP_QUALITY
            else if (hdr.bridged.relay == 1 && hdr.bridged.rtcp == 0 && hdr.rtp.isValid()) {
                measure = true;
                ms_clock.apply(eg_prsr_md.global_tstamp, eg_md.now_ms);
                rtp_clock.apply(eg_prsr_md.global_tstamp, eg_md.now_clk);
            }
#endif
        }
#ifdef WITH_RTP_QUALITY
        if (eg_md.writeback.isValid()) {
            /* jitter write-back copy (no packet headers parsed): it writes
             * rtp_jitter and is never transmitted */
            eg_dprsr_md.drop_ctl = 1;
        }
        if (measure || eg_md.writeback.isValid()) {
            rtp_quality.apply(hdr, eg_md, eg_intr_md, eg_dprsr_md);
        }
#endif
    }
}
