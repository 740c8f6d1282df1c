/* p4relay — learning digest with repeat suppression.
 *
 * A UDP packet to a relay address:port (relay_addr hit) that matches no
 * session raises pipe.IngressDeparser.learn so the agent learns the
 * NAT-latched source. learn_filter is a hashed, time-stamped register of
 * recently reported flows: a slot reports again once its timestamp is older
 * than LEARN_FILTER_AGE_MS, so a digest lost while the agent restarts comes
 * back. Two flows sharing a slot delay each other by at most that age.
 */
control LearnFilter(
        in ingress_headers_t hdr,
        inout ingress_metadata_t ig_md,
        inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md) {

    Hash<bit<LEARN_FILTER_INDEX_BITS>>(HashAlgorithm_t.CRC16) flow_hash;

    @name(".Ingress.learn_filter")
    Register<bit<32>, bit<LEARN_FILTER_INDEX_BITS>>(LEARN_FILTER_SIZE, 0) learn_filter;

    /* 0 = never reported; otherwise the ms time of the last report. */
    RegisterAction<bit<32>, bit<LEARN_FILTER_INDEX_BITS>, bit<1>>(learn_filter) report_if_aged = {
        void apply(inout bit<32> reported_ms, out bit<1> report) {
            if (reported_ms == 0 || ig_md.now_ms - reported_ms > LEARN_FILTER_AGE_MS) {
                reported_ms = ig_md.now_ms;
                report = 1;
            } else {
                report = 0;
            }
        }
    };

    bit<1> do_report;

    apply {
        ig_md.learn_slot = flow_hash.get({
            hdr.ipv4.src_addr,
            hdr.ipv4.dst_addr,
            hdr.udp.src_port,
            hdr.udp.dst_port
        });
        do_report = report_if_aged.execute(ig_md.learn_slot);
        if (do_report == 1) {
            ig_dprsr_md.digest_type = DIGEST_TYPE_LEARN;
        }
    }
}
