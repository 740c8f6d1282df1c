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

    apply {
        if (ig_md.ipv4_csum_update) {
            /* residual + the (possibly rewritten) words = the full header sum */
            hdr.ipv4.hdr_checksum = ipv4_checksum.update({
                hdr.ipv4.ttl,
                hdr.ipv4.protocol,
                hdr.ipv4.src_addr,
                hdr.ipv4.dst_addr,
                ig_md.ipv4_csum_residual
            });
        }
        if (ig_md.udp_csum_update) {
            /* Only set when the packet carried a checksum: zero stays zero.
             * A result of 0 is sent as 0xffff (RFC 768). */
            hdr.udp.checksum = udp_checksum.update(data = {
                hdr.ipv4.src_addr,
                hdr.ipv4.dst_addr,
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

        pkt.emit(hdr);
    }
}
