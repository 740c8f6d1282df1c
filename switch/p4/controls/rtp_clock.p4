/* p4relay — time bases derived from the ingress MAC timestamp (ns, 48 bit).
 *
 * No division on Tofino: constants are sums of shifts of x = ts >> 16.
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

    bit<32> x;
    bit<32> ms_b;
    bit<32> ms_c;
    bit<32> clk_b;
    bit<32> clk_c;

    apply {
        x = ig_intr_md.ingress_mac_tstamp[47:16];
        /* one shift per statement: each is one VLIW instruction */
        ig_md.now_ms = x >> 4;
        ms_b = x >> 9;
        ms_c = x >> 10;
        ig_md.arrival_clk = x >> 1;
        clk_b = x >> 6;
        clk_c = x >> 7;
        ig_md.now_ms = ig_md.now_ms + ms_b;
        ig_md.arrival_clk = ig_md.arrival_clk + clk_b;
        ig_md.now_ms = ig_md.now_ms + ms_c;
        ig_md.arrival_clk = ig_md.arrival_clk + clk_c;
    }
}
