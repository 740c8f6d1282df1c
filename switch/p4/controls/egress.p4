/* p4relay — egress: drop IPv4 packets whose total_len claims more bytes than
 * the frame has. Tofino 1 knows the packet length only here
 * (eg_intr_md.pkt_length), so the check cannot run in ingress. pkt_length is
 * compared without subtracting an FCS: if the hardware counts the 4 FCS bytes,
 * an overrun of up to 4 bytes passes (README "Not verified").
 * iRED (queue management) and INT (telemetry) will live here too. */
control Egress(
        inout egress_headers_t hdr,
        inout egress_metadata_t eg_md,
        in egress_intrinsic_metadata_t eg_intr_md,
        in egress_intrinsic_metadata_from_parser_t eg_prsr_md,
        inout egress_intrinsic_metadata_for_deparser_t eg_dprsr_md,
        inout egress_intrinsic_metadata_for_output_port_t eg_oport_md) {

    bit<16> l3_len;
    bit<16> room;

    apply {
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
        }
    }
}
