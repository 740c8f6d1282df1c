/* p4relay — egress parser. Egress is bypassed until iRED / INT land; the
 * intrinsic metadata is still extracted as TNA requires. */
parser EgressParser(
        packet_in pkt,
        out egress_headers_t hdr,
        out egress_metadata_t eg_md,
        out egress_intrinsic_metadata_t eg_intr_md) {

    state start {
        pkt.extract(eg_intr_md);
        transition accept;
    }
}
