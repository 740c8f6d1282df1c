/* p4relay — time bases from a 48-bit ns timestamp: the ingress MAC timestamp
 * (Ingress: learn filter) or the egress global timestamp (Egress: RTP quality,
 * i.e. the time the packet left the queue).
 *
 * No division on Tofino: constants are sums of shifted copies, and a shift of
 * the timestamp is just a bit slice of it (no shift instruction, no stage):
 *   ms  = ts / 1e6     ~ ts>>20 + ts>>25 + ts>>26   (-0.16 %)
 *   clk = ts / 125000  ~ ts>>17 + ts>>22 + ts>>23   (-0.17 %), 8 kHz RTP clock
 * Both wrap at 2^32 (ms: 49.7 days); the 48-bit ns counter itself wraps
 * every 3.26 days, which costs one jitter sample per leg at that instant.
 * Both timestamps come from the same global timer (the SDE's epoch, not wall
 * time): the control plane compares rtp_last_seen readings with each other.
 */
control MsClock(
        in bit<48> tstamp,
        out bit<32> now_ms) {

    bit<32> ms_b;
    bit<32> ms_c;

    apply {
        now_ms = (bit<32>)tstamp[47:20];
        ms_b = (bit<32>)tstamp[47:25];
        ms_c = (bit<32>)tstamp[47:26];
        now_ms = now_ms + ms_b;
        now_ms = now_ms + ms_c;
    }
}

control RtpClock(
        in bit<48> tstamp,
        out bit<32> now_clk) {

    bit<32> clk_b;
    bit<32> clk_c;

    apply {
        now_clk = (bit<32>)tstamp[47:17];
        clk_b = (bit<32>)tstamp[47:22];
        clk_c = (bit<32>)tstamp[47:23];
        now_clk = now_clk + clk_b;
        now_clk = now_clk + clk_c;
    }
}
