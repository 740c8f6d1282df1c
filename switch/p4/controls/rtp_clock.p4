/* p4relay — time bases from a 48-bit ns timestamp: the ingress MAC timestamp
 * (Ingress: learn filter) or the egress global timestamp (Egress: RTP quality,
 * i.e. the time the packet left the queue).
 *
 * No division on Tofino: constants are sums of shifted copies, and a shift of
 * the timestamp is just a bit slice of it:
 *   ms  = ts / 1e6     ~ ts>>20 + ts>>25 + ts>>26   (-0.16 %)
 *   clk = ts / 125000  ~ ts>>17 + ts>>22 + ts>>23   (-0.17 %), 8 kHz RTP clock
 * Both wrap at 2^32 (ms: 49.7 days); the 48-bit ns counter itself wraps
 * every 3.26 days, which costs one jitter sample per leg at that instant.
 * Both timestamps come from the same global timer (the SDE's epoch, not wall
 * time): the control plane compares rtp_last_seen readings with each other.
 * Each takes three MAU stages: the shifted copies (one stage, each its own
 * container), then two dependent additions. Every step is its own action,
 * since an action runs in one stage with one operation per field.
 */
control MsClock(
        in bit<48> tstamp,
        out bit<32> now_ms) {

    bit<32> ms_b;
    bit<32> ms_c;

    action ms_slices() {
        now_ms = (bit<32>)tstamp[47:20];
        ms_b = (bit<32>)tstamp[47:25];
        ms_c = (bit<32>)tstamp[47:26];
    }

    action ms_add_b() {
        now_ms = now_ms + ms_b;
    }

    action ms_add_c() {
        now_ms = now_ms + ms_c;
    }

    apply {
        ms_slices();
        ms_add_b();
        ms_add_c();
    }
}

#if __TARGET_TOFINO__ == 2 && defined(WITH_REROUTE)
/* MsClock's sum from the timestamp's bits 47:16 (65,536 ns ticks), which
 * the ingress parser bridges anyway (hdr.bridged.rr_ingress_ts): the same
 * slices, 16 bits lower, so the same value. Tofino 2 only: there three
 * shifted slices of ingress_mac_tstamp beside the parser's [47:16] copy
 * leave the PHV allocator no placement but one container per bit; from the
 * 32-bit copy the shifts are plain deposits, as in Egress. */
control MsClockTicks(
        in bit<32> ticks,
        out bit<32> now_ms) {

    bit<32> ms_b;
    bit<32> ms_c;

    action ms_slices() {
        now_ms = (bit<32>)ticks[31:4];
        ms_b = (bit<32>)ticks[31:9];
        ms_c = (bit<32>)ticks[31:10];
    }

    action ms_add_b() {
        now_ms = now_ms + ms_b;
    }

    action ms_add_c() {
        now_ms = now_ms + ms_c;
    }

    apply {
        ms_slices();
        ms_add_b();
        ms_add_c();
    }
}
#endif

#ifdef WITH_RTP_QUALITY
/* RTP transit time (RFC 3550 A.8): departure in 8 kHz units minus the
 * packet's RTP timestamp, clk - rtp_ts = (ts>>17 + ts>>22) + (ts>>23 - rtp_ts):
 * the two halves are independent (one stage), their sum the next. */
control RtpClock(
        in bit<48> tstamp,
        in bit<32> rtp_timestamp,
        out bit<32> transit) {

    bit<32> clk_ab;
    bit<32> clk_b;
    bit<32> clk_c_minus_ts;

    action clk_slices() {
        clk_ab = (bit<32>)tstamp[47:17];
        clk_b = (bit<32>)tstamp[47:22];
        clk_c_minus_ts = (bit<32>)tstamp[47:23];
    }

    action halves() {
        clk_ab = clk_ab + clk_b;
        clk_c_minus_ts = clk_c_minus_ts - rtp_timestamp;
    }

    action sum_halves() {
        transit = clk_ab + clk_c_minus_ts;
    }

    apply {
        clk_slices();
        halves();
        sum_halves();
    }
}
#endif
