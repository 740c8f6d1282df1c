/* p4relay — learning digest with repeat suppression.
 *
 * A UDP packet to a relay address:port (relay_addr hit) that matches no
 * session raises pipe.IngressDeparser.learn so the agent learns the
 * NAT-latched source. learn_filter is a hashed, time-stamped register of
 * recently reported flows: a slot reports again once its timestamp is older
 * than LEARN_FILTER_AGE_MS, so a digest lost while the agent restarts comes
 * back. Two flows sharing a slot delay each other by at most that age.
 * The bound port (relay's key: the ingress port, or UNBOUND_PORT where
 * binding is off) is part of the flow: a spoofed copy of a party's flow
 * arriving on another bound port does not suppress the party's own digest,
 * and where binding is off a flow reports once whichever port it takes.
 */
control LearnFilter(
        in ingress_headers_t hdr,
        inout ingress_metadata_t ig_md,
        inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md) {

    Hash<bit<LEARN_FILTER_INDEX_BITS>>(HashAlgorithm_t.CRC16) flow_hash;

    @name(".Ingress.learn_filter")
    Register<bit<32>, bit<LEARN_FILTER_INDEX_BITS>>(LEARN_FILTER_SIZE, 0) learn_filter;

    /* 0 = never reported; otherwise the ms time of the last report. */
    /* Its output is the digest type itself (DIGEST_TYPE_LEARN or 0): no
     * stage after the register to turn a flag into it. */
    RegisterAction<bit<32>, bit<LEARN_FILTER_INDEX_BITS>, bit<3>>(learn_filter) report_if_aged = {
        void apply(inout bit<32> reported_ms, out bit<3> digest_type) {
            if (reported_ms == 0 || ig_md.now_ms - reported_ms > LEARN_FILTER_AGE_MS) {
                reported_ms = ig_md.now_ms;
                digest_type = DIGEST_TYPE_LEARN;
            } else {
                digest_type = 0;
            }
        }
    };

    /* The ports as the packet arrived (the parser's copies): a flow that
     * reports is never rewritten, and hashing hdr.udp would make the filter
     * wait for both families' rewrites. */
    apply {
        /* the slot is hashed in the register's own stage (no metadata copy) */
        ig_dprsr_md.digest_type = report_if_aged.execute(flow_hash.get({
            hdr.ipv4.src_addr,
            hdr.ipv4.dst_addr,
            ig_md.l4_src_port,
            ig_md.l4_dst_port,
            ig_md.bound_port
        }));
    }
}

/* The same for IPv6 flows, with its own slots (learn_filter6): hashing
 * either family's fields into one register's index would take a stage to
 * pick the hash. Its output is the digest type DIGEST_TYPE_LEARN6 or 0. */
control LearnFilter6(
        in ingress_headers_t hdr,
        inout ingress_metadata_t ig_md,
        inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md) {

    Hash<bit<LEARN_FILTER_INDEX_BITS>>(HashAlgorithm_t.CRC16) flow_hash;

    @name(".Ingress.learn_filter6")
    Register<bit<32>, bit<LEARN_FILTER_INDEX_BITS>>(LEARN_FILTER_SIZE, 0) learn_filter6;

    RegisterAction<bit<32>, bit<LEARN_FILTER_INDEX_BITS>, bit<3>>(learn_filter6) report_if_aged = {
        void apply(inout bit<32> reported_ms, out bit<3> digest_type) {
            if (reported_ms == 0 || ig_md.now_ms - reported_ms > LEARN_FILTER_AGE_MS) {
                reported_ms = ig_md.now_ms;
                digest_type = DIGEST_TYPE_LEARN6;
            } else {
                digest_type = 0;
            }
        }
    };

    apply {
        ig_dprsr_md.digest_type = report_if_aged.execute(flow_hash.get({
            hdr.ipv6.src_addr,
            hdr.ipv6.dst_addr,
            ig_md.l4_src_port,
            ig_md.l4_dst_port,
            ig_md.bound_port
        }));
    }
}
