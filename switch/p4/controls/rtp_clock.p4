/* p4relay — time bases derived from the ingress MAC timestamp (ns, 48 bit).
 *
 * No division on Tofino: constants are sums of shifted copies, and a shift of
 * the timestamp is just a bit slice of it (no shift instruction, no stage):
 *   ms  = ts / 1e6     ~ ts>>20 + ts>>25 + ts>>26   (-0.16 %)
 *   clk = ts / 125000  ~ ts>>17 + ts>>22 + ts>>23   (-0.17 %), 8 kHz RTP clock
 * Both wrap at 2^32 (ms: 49.7 days); the 48-bit ns counter itself wraps
 * every 3.26 days, which costs one jitter sample per leg at that instant.
 * The timestamp counts from the SDE's global-timestamp epoch, not wall time:
 * the control plane compares rtp_last_seen readings with each other.
 */
control RtpClock(
        inout ingress_metadata_t ig_md,
        in ingress_intrinsic_metadata_t ig_intr_md) {

    bit<32> ms_b;
    bit<32> ms_c;
    bit<32> clk_b;
    bit<32> clk_c;

    apply {
        ig_md.now_ms = (bit<32>)ig_intr_md.ingress_mac_tstamp[47:20];
        ms_b = (bit<32>)ig_intr_md.ingress_mac_tstamp[47:25];
        ms_c = (bit<32>)ig_intr_md.ingress_mac_tstamp[47:26];
        ig_md.arrival_clk = (bit<32>)ig_intr_md.ingress_mac_tstamp[47:17];
        clk_b = (bit<32>)ig_intr_md.ingress_mac_tstamp[47:22];
        clk_c = (bit<32>)ig_intr_md.ingress_mac_tstamp[47:23];
        ig_md.now_ms = ig_md.now_ms + ms_b;
        ig_md.arrival_clk = ig_md.arrival_clk + clk_b;
        ig_md.now_ms = ig_md.now_ms + ms_c;
        ig_md.arrival_clk = ig_md.arrival_clk + clk_c;
    }
}
