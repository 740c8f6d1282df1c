/* p4relay — per-leg RTP quality (RTP entries only, i.e. rtcp == 0).
 *
 * Tofino allows one access per register per packet, in one stage, with a
 * small stateful ALU (no shifter on Tofino 1). So:
 *  - counters, highest sequence, transit, last-seen and payload type are
 *    single read-modify-write RegisterActions;
 *  - loss / reorder: rtp_max_seq returns seq - max (mod 2^16); the MAU sorts
 *    it into "newer by n" (n - 1 lost) or "older" (reordered);
 *  - jitter, RFC 3550 A.8 exactly: J += |D| - ((J + 8) >> 4), J stored
 *    scaled by 16. The update depends on J itself through a shift, which the
 *    stateful ALU cannot do. The first pass reads J and computes the new
 *    value in the MAU; the packet is resubmitted once with (leg, new J) and
 *    the second pass writes it. Another packet of the
 *    same leg arriving within that sub-microsecond window would have its
 *    sample overwritten; at 50 packets/s per leg this does not happen.
 * The control plane zeroes a leg's registers before reusing the leg index.
 */
control RtpQuality(
        in ingress_headers_t hdr,
        inout ingress_metadata_t ig_md,
        inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md) {

    @name(".Ingress.rtp_packets")
    Register<bit<32>, leg_t>(LEG_TABLE_SIZE, 0) rtp_packets;
    RegisterAction<bit<32>, leg_t, bit<32>>(rtp_packets) count_packet = {
        void apply(inout bit<32> n, out bit<32> before) {
            before = n;
            n = n + 1;
        }
    };

    @name(".Ingress.rtp_max_seq")
    Register<bit<16>, leg_t>(LEG_TABLE_SIZE, 0) rtp_max_seq;
    RegisterAction<bit<16>, leg_t, bit<16>>(rtp_max_seq) seq_first = {
        void apply(inout bit<16> max_seq) {
            max_seq = hdr.rtp.sequence_number;
        }
    };
    RegisterAction<bit<16>, leg_t, bit<16>>(rtp_max_seq) seq_next = {
        void apply(inout bit<16> max_seq, out bit<16> delta) {
            delta = hdr.rtp.sequence_number - max_seq;
            if (hdr.rtp.sequence_number - max_seq < RTP_SEQ_HALF_RANGE) {
                max_seq = hdr.rtp.sequence_number;
            }
        }
    };

    @name(".Ingress.rtp_lost")
    Register<bit<32>, leg_t>(LEG_TABLE_SIZE, 0) rtp_lost;
    RegisterAction<bit<32>, leg_t, bit<32>>(rtp_lost) add_lost = {
        void apply(inout bit<32> lost) {
            lost = lost + ig_md.rtp_lost_inc;
        }
    };

    @name(".Ingress.rtp_reordered")
    Register<bit<32>, leg_t>(LEG_TABLE_SIZE, 0) rtp_reordered;
    RegisterAction<bit<32>, leg_t, bit<32>>(rtp_reordered) add_reordered = {
        void apply(inout bit<32> reordered) {
            reordered = reordered + 1;
        }
    };

    @name(".Ingress.rtp_transit")
    Register<bit<32>, leg_t>(LEG_TABLE_SIZE, 0) rtp_transit;
    RegisterAction<bit<32>, leg_t, bit<32>>(rtp_transit) swap_transit = {
        void apply(inout bit<32> transit, out bit<32> d) {
            d = ig_md.rtp_transit - transit;
            transit = ig_md.rtp_transit;
        }
    };

    @name(".Ingress.rtp_jitter")
    Register<bit<32>, leg_t>(LEG_TABLE_SIZE, 0) rtp_jitter;
    RegisterAction<bit<32>, leg_t, bit<32>>(rtp_jitter) read_jitter = {
        void apply(inout bit<32> jitter, out bit<32> current) {
            current = jitter;
        }
    };
    RegisterAction<bit<32>, leg_t, bit<32>>(rtp_jitter) write_jitter = {
        void apply(inout bit<32> jitter) {
            jitter = ig_md.resubmit.jitter;
        }
    };

    @name(".Ingress.rtp_last_seen")
    Register<bit<32>, leg_t>(LEG_TABLE_SIZE, 0) rtp_last_seen;
    RegisterAction<bit<32>, leg_t, bit<32>>(rtp_last_seen) touch = {
        void apply(inout bit<32> seen_ms) {
            seen_ms = ig_md.now_ms;
        }
    };

    @name(".Ingress.rtp_payload_type")
    Register<bit<8>, leg_t>(LEG_TABLE_SIZE, 0) rtp_payload_type;
    RegisterAction<bit<8>, leg_t, bit<8>>(rtp_payload_type) store_payload_type = {
        void apply(inout bit<8> pt) {
            pt = (bit<8>)hdr.rtp.payload_type;
        }
    };

    bit<32> jitter_now;
    bit<32> abs_d;

    apply {
        if (ig_md.resubmit.isValid()) {
            /* second pass: only the jitter write-back */
            write_jitter.execute(ig_md.resubmit.leg);
        } else {
            ig_md.rtp_count_before = count_packet.execute(ig_md.leg);
            touch.execute(ig_md.leg);
            store_payload_type.execute(ig_md.leg);
            ig_md.rtp_transit = ig_md.arrival_clk - hdr.rtp.timestamp;
            ig_md.rtp_transit_delta = swap_transit.execute(ig_md.leg);

            if (ig_md.rtp_count_before == 0) {
                seq_first.execute(ig_md.leg);
            } else {
                ig_md.rtp_seq_delta = seq_next.execute(ig_md.leg);
                if (ig_md.rtp_seq_delta == 0) {
                    /* duplicate: neither lost nor reordered */
                } else if (ig_md.rtp_seq_delta[15:15] == 0) {
                    if (ig_md.rtp_seq_delta != 1) {
                        ig_md.rtp_lost_inc = (bit<32>)ig_md.rtp_seq_delta;
                        ig_md.rtp_lost_inc = ig_md.rtp_lost_inc - 1;
                        add_lost.execute(ig_md.leg);
                    }
                } else {
                    add_reordered.execute(ig_md.leg);
                }

                /* RFC 3550 A.8: d = transit - last transit; J += |d| - ((J + 8) >> 4) */
                if (ig_md.rtp_transit_delta[31:31] == 1) {
                    abs_d = 0 - ig_md.rtp_transit_delta;
                } else {
                    abs_d = ig_md.rtp_transit_delta;
                }
                jitter_now = read_jitter.execute(ig_md.leg);
                ig_md.jitter_plus_8 = jitter_now + JITTER_ROUND;
                ig_md.jitter_grown = jitter_now + abs_d;
                ig_md.jitter_decay = ig_md.jitter_plus_8 >> JITTER_SHIFT;
                ig_md.resubmit.setValid();
                ig_md.resubmit.leg = ig_md.leg;
                ig_md.resubmit._pad = 0;
                ig_md.resubmit.jitter = ig_md.jitter_grown - ig_md.jitter_decay;
                ig_dprsr_md.resubmit_type = RESUBMIT_TYPE_JITTER;
            }
        }
    }
}
