/* p4relay — per-leg RTP quality, measured in Egress: when the packet LEAVES
 * the queue, so a packet the traffic manager tail-drops never gets here and
 * shows as a sequence gap (the loss count), and queueing delay variation in
 * the transit times (rtp_jitter); rtp_last_seen is the departure time.
 * Egress applies it to every packet and it picks its own: relayed RTP of an
 * offloaded leg (bridged relay = 1, rtcp = 0, RTP header parsed) that passed
 * the length check, and jitter write-back copies; the leg comes from Ingress
 * in the bridged header. One operation per field and stage: the jitter's
 * steps are separate actions (jitter_terms, jitter_decay, jitter_writeback).
 *
 * Tofino allows one access per register per pass, in one stage, by a small
 * stateful ALU (no shifter on Tofino 1). So:
 *  - counters, highest sequence, transit, last-seen and payload type are
 *    single read-modify-write RegisterActions;
 *  - loss / reorder: rtp_max_seq returns seq - max (mod 2^16); the MAU sorts
 *    it into "newer by n" (n - 1 lost) or "older" (reordered);
 *  - jitter, RFC 3550 A.8 exactly: J += |D| - ((J + 8) >> 4), J stored
 *    scaled by 16. The new J depends on the old one through a shift, which
 *    the stateful ALU cannot do, and no stored value can carry it to the next
 *    packet in one pass (whatever feeds the ALU must be computed before its
 *    stage, from registers of earlier stages, which cannot depend on J). The
 *    MathUnit (the SALU's only non-linear part) keeps 4 significant bits:
 *    J/16 off by up to 12.5 %, i.e. J biased up by up to 14 %. Egress has no
 *    resubmit, so the one exact way is a second egress pass: this pass reads
 *    J and computes J' in the MAU; the deparser sends an egress-to-egress
 *    mirror copy carrying (leg, J') (jitter_writeback_h, truncated by the
 *    session) to a port of the same pipe; the copy's pass writes J' and is
 *    dropped. Session JITTER_WRITEBACK_SESSION_BASE + pipe (bootstrap).
 *    Error bound: every sample is exact A.8, except a sample is lost (J keeps
 *    the value it had, the next D is still exact since rtp_transit is written
 *    in the first pass) when (a) another packet of the same leg leaves
 *    before the copy's pass (a write-back takes ~1 us plus the copy's wait at
 *    the write-back port: only after > 20 ms of queueing that then drains) or
 *    (b) the traffic manager drops the copy (buffer exhausted). A lost sample
 *    leaves J off by its step ||D| - J/16| (stored units), decaying by 15/16
 *    per packet. A missing session loses every sample (J stays 0): the
 *    bootstrap creates the sessions.
 * The control plane zeroes a leg's registers before reusing the leg index.
 *
 * Placement (Tofino 1 has no long branches: a gated block spanning several
 * stages cannot share them with the other features): every step is its own
 * single-stage item gated by a metadata bit computed once (rtp_on, rtp_seen,
 * the loss code), so the compiler interleaves RtpQuality with reroute
 * detection, INT and iRED. Chains: count -> sequence -> lost/reordered;
 * transit (|D|) and J + 8 -> terms -> J' (3 stages after the clock).
 */
/* QUALITY_SPLIT (profiles.p4): each register is two, the leg's bit
 * QUALITY_HALF_BITS choosing the half and its low bits the cell; the upper
 * half's register and RegisterActions carry the suffix _hi. QUALITY_RUN /
 * QUALITY_GET run a RegisterAction on the leg's half. */
#ifdef QUALITY_SPLIT
typedef bit<QUALITY_HALF_BITS> quality_index_t;
#define QUALITY_RUN(act, leg) \
    if (leg[QUALITY_HALF_BITS:QUALITY_HALF_BITS] == 0) { \
        act.execute(leg[QUALITY_HALF_BITS - 1:0]); \
    } else { \
        act##_hi.execute(leg[QUALITY_HALF_BITS - 1:0]); \
    }
#define QUALITY_GET(out, act, leg) \
    if (leg[QUALITY_HALF_BITS:QUALITY_HALF_BITS] == 0) { \
        out = act.execute(leg[QUALITY_HALF_BITS - 1:0]); \
    } else { \
        out = act##_hi.execute(leg[QUALITY_HALF_BITS - 1:0]); \
    }
#else
typedef leg_t quality_index_t;
#define QUALITY_RUN(act, leg) act.execute(leg);
#define QUALITY_GET(out, act, leg) out = act.execute(leg);
#endif
/* STEP(step, access): the register access, which without QUALITY_SPLIT is
 * the keyless table `step` (EARLY_STEP, profiles.p4: Tofino 1 with IPv6
 * places it in the first stage its inputs allow) */
#ifdef QUALITY_SPLIT
#define STEP(step, access) access
#else
#define STEP(step, access) step.apply();
#endif

control RtpQuality(
        in egress_headers_t hdr,
        inout egress_metadata_t eg_md,
        inout egress_intrinsic_metadata_for_deparser_t eg_dprsr_md) {

    @name(".Egress.rtp_packets")
    Register<bit<32>, quality_index_t>(QUALITY_CELLS, 0) rtp_packets;
    /* counts, and says whether the leg had packets before (1) or not (0) */
    RegisterAction<bit<32>, quality_index_t, bit<8>>(rtp_packets) count_packet = {
        void apply(inout bit<32> n, out bit<8> seen) {
            if (n == 0) {
                seen = 0;
            } else {
                seen = 1;
            }
            n = n + 1;
        }
    };

    @name(".Egress.rtp_max_seq")
    Register<bit<16>, quality_index_t>(QUALITY_CELLS, 0) rtp_max_seq;
    RegisterAction<bit<16>, quality_index_t, bit<16>>(rtp_max_seq) seq_first = {
        void apply(inout bit<16> max_seq) {
            max_seq = hdr.rtp.sequence_number;
        }
    };
    /* returns seq - max - 1 (mod 2^16), the loss code: 0 in order, 1..0x7FFE
     * that many lost, 0x7FFF..0xFFFE older (reordered), 0xFFFF duplicate;
     * seq - 1 comes from the MAU (rtp_seq_prep), so no stage is spent on
     * the - 1 after the register */
    RegisterAction<bit<16>, quality_index_t, bit<16>>(rtp_max_seq) seq_next = {
        void apply(inout bit<16> max_seq, out bit<16> code) {
            code = eg_md.rtp_seq_m1 - max_seq;
            if (hdr.rtp.sequence_number - max_seq < RTP_SEQ_HALF_RANGE) {
                max_seq = hdr.rtp.sequence_number;
            }
        }
    };
#if __TARGET_TOFINO__ == 2
    @name(".Egress.rtp_lost")
    Register<bit<32>, quality_index_t>(QUALITY_CELLS, 0) rtp_lost;
    RegisterAction<bit<32>, quality_index_t, bit<32>>(rtp_lost) add_lost = {
        void apply(inout bit<32> lost) {
            lost = lost + (bit<32>)eg_md.rtp_loss_code;
        }
    };

    @name(".Egress.rtp_reordered")
    Register<bit<32>, quality_index_t>(QUALITY_CELLS, 0) rtp_reordered;
    RegisterAction<bit<32>, quality_index_t, bit<32>>(rtp_reordered) add_reordered = {
        void apply(inout bit<32> reordered) {
            reordered = reordered + 1;
        }
    };
#endif
    /* D = transit - last transit, returned as |D| (its sign only selects
     * which of the two differences the ALU outputs) */
    @name(".Egress.rtp_transit")
    Register<bit<32>, quality_index_t>(QUALITY_CELLS, 0) rtp_transit;
    RegisterAction<bit<32>, quality_index_t, bit<32>>(rtp_transit) swap_transit = {
        void apply(inout bit<32> transit, out bit<32> abs_d) {
            if (eg_md.rtp_transit - transit < 0x80000000) {
                abs_d = eg_md.rtp_transit - transit;
            } else {
                abs_d = transit - eg_md.rtp_transit;
            }
            transit = eg_md.rtp_transit;
        }
    };
#include "include/rtp_loss.p4"
    /* read as J + 8 (A.8's rounding term added by the ALU); the write-back
     * copy carries J' + 8 and the write takes the 8 off again */
    @name(".Egress.rtp_jitter")
    Register<bit<32>, quality_index_t>(QUALITY_CELLS, 0) rtp_jitter;
    RegisterAction<bit<32>, quality_index_t, bit<32>>(rtp_jitter) read_jitter = {
        void apply(inout bit<32> jitter, out bit<32> plus_round) {
            plus_round = jitter + JITTER_ROUND;
        }
    };
    RegisterAction<bit<32>, quality_index_t, bit<32>>(rtp_jitter) write_jitter = {
        void apply(inout bit<32> jitter) {
            jitter = eg_md.writeback.jitter - JITTER_ROUND;
        }
    };

    @name(".Egress.rtp_last_seen")
    Register<bit<32>, quality_index_t>(QUALITY_CELLS, 0) rtp_last_seen;
    RegisterAction<bit<32>, quality_index_t, bit<32>>(rtp_last_seen) touch = {
        void apply(inout bit<32> seen_ms) {
            seen_ms = eg_md.now_ms;
        }
    };

    @name(".Egress.rtp_payload_type")
    Register<bit<8>, quality_index_t>(QUALITY_CELLS, 0) rtp_payload_type;
    RegisterAction<bit<8>, quality_index_t, bit<8>>(rtp_payload_type) store_payload_type = {
        void apply(inout bit<8> pt) {
            pt = (bit<8>)hdr.rtp.payload_type;
        }
    };

#ifdef QUALITY_SPLIT
    /* The upper half of every register (legs from 2^QUALITY_HALF_BITS,
     * QUALITY_HI_CELLS of them): the same ALU programs as above. */
    @name(".Egress.rtp_packets_hi")
    Register<bit<32>, quality_index_t>(QUALITY_HI_CELLS, 0) rtp_packets_hi;
    RegisterAction<bit<32>, quality_index_t, bit<8>>(rtp_packets_hi) count_packet_hi = {
        void apply(inout bit<32> n, out bit<8> seen) {
            if (n == 0) {
                seen = 0;
            } else {
                seen = 1;
            }
            n = n + 1;
        }
    };

    @name(".Egress.rtp_max_seq_hi")
    Register<bit<16>, quality_index_t>(QUALITY_HI_CELLS, 0) rtp_max_seq_hi;
    RegisterAction<bit<16>, quality_index_t, bit<16>>(rtp_max_seq_hi) seq_first_hi = {
        void apply(inout bit<16> max_seq) {
            max_seq = hdr.rtp.sequence_number;
        }
    };
    RegisterAction<bit<16>, quality_index_t, bit<16>>(rtp_max_seq_hi) seq_next_hi = {
        void apply(inout bit<16> max_seq, out bit<16> code) {
            code = eg_md.rtp_seq_m1 - max_seq;
            if (hdr.rtp.sequence_number - max_seq < RTP_SEQ_HALF_RANGE) {
                max_seq = hdr.rtp.sequence_number;
            }
        }
    };
#if __TARGET_TOFINO__ == 2
    @name(".Egress.rtp_lost_hi")
    Register<bit<32>, quality_index_t>(QUALITY_HI_CELLS, 0) rtp_lost_hi;
    RegisterAction<bit<32>, quality_index_t, bit<32>>(rtp_lost_hi) add_lost_hi = {
        void apply(inout bit<32> lost) {
            lost = lost + (bit<32>)eg_md.rtp_loss_code;
        }
    };

    @name(".Egress.rtp_reordered_hi")
    Register<bit<32>, quality_index_t>(QUALITY_HI_CELLS, 0) rtp_reordered_hi;
    RegisterAction<bit<32>, quality_index_t, bit<32>>(rtp_reordered_hi) add_reordered_hi = {
        void apply(inout bit<32> reordered) {
            reordered = reordered + 1;
        }
    };
#endif
    @name(".Egress.rtp_transit_hi")
    Register<bit<32>, quality_index_t>(QUALITY_HI_CELLS, 0) rtp_transit_hi;
    RegisterAction<bit<32>, quality_index_t, bit<32>>(rtp_transit_hi) swap_transit_hi = {
        void apply(inout bit<32> transit, out bit<32> abs_d) {
            if (eg_md.rtp_transit - transit < 0x80000000) {
                abs_d = eg_md.rtp_transit - transit;
            } else {
                abs_d = transit - eg_md.rtp_transit;
            }
            transit = eg_md.rtp_transit;
        }
    };

    @name(".Egress.rtp_jitter_hi")
    Register<bit<32>, quality_index_t>(QUALITY_HI_CELLS, 0) rtp_jitter_hi;
    RegisterAction<bit<32>, quality_index_t, bit<32>>(rtp_jitter_hi) read_jitter_hi = {
        void apply(inout bit<32> jitter, out bit<32> plus_round) {
            plus_round = jitter + JITTER_ROUND;
        }
    };
    RegisterAction<bit<32>, quality_index_t, bit<32>>(rtp_jitter_hi) write_jitter_hi = {
        void apply(inout bit<32> jitter) {
            jitter = eg_md.writeback.jitter - JITTER_ROUND;
        }
    };

    @name(".Egress.rtp_last_seen_hi")
    Register<bit<32>, quality_index_t>(QUALITY_HI_CELLS, 0) rtp_last_seen_hi;
    RegisterAction<bit<32>, quality_index_t, bit<32>>(rtp_last_seen_hi) touch_hi = {
        void apply(inout bit<32> seen_ms) {
            seen_ms = eg_md.now_ms;
        }
    };

    @name(".Egress.rtp_payload_type_hi")
    Register<bit<8>, quality_index_t>(QUALITY_HI_CELLS, 0) rtp_payload_type_hi;
    RegisterAction<bit<8>, quality_index_t, bit<8>>(rtp_payload_type_hi) store_payload_type_hi = {
        void apply(inout bit<8> pt) {
            pt = (bit<8>)hdr.rtp.payload_type;
        }
    };
#endif

#ifndef QUALITY_SPLIT
    /* the two registers no later step reads, as steps (STEP above) */
    EARLY_STEP(rtp_last_seen_step, touch.execute(hdr.bridged.leg))
    EARLY_STEP(rtp_payload_type_step, store_payload_type.execute(hdr.bridged.leg))
#endif

    /* relayed RTP of an offloaded leg that passed the length check */
    action rtp_select() {
        eg_md.rtp_on = 1;
    }

    action rtp_seq_prep() {
        eg_md.rtp_seq_m1 = hdr.rtp.sequence_number - 1;
    }

    /* RFC 3550 A.8 with K = J + 8 from the register:
     * J' + 8 = (K + |D|) - (K >> 4), one step per stage */
    action jitter_terms() {
        eg_md.jitter_decay = eg_md.jitter_plus_8 >> JITTER_SHIFT;
        eg_md.jitter_grown = eg_md.jitter_plus_8 + eg_md.rtp_transit_abs_d;
    }

    /* the copy's mirror header (J' + 8); session BASE + this egress pipe
     * (set by the parser): a port of this pipe, whose registers the copy
     * writes. */
    action jitter_writeback() {
        eg_md.writeback.setValid();
        eg_md.writeback.pkt_type = PKT_TYPE_JITTER_WRITEBACK;
        eg_md.writeback._pad = 0;
        eg_md.writeback.leg = hdr.bridged.leg;
        eg_md.writeback.jitter = eg_md.jitter_grown - eg_md.jitter_decay;
        eg_dprsr_md.mirror_type = MIRROR_TYPE_JITTER_WRITEBACK;
    }

    apply {
        rtp_seq_prep();
        if (hdr.bridged.isValid() && eg_md.l3_overrun == 0 && hdr.bridged.relay == 1
                && hdr.bridged.rtcp == 0 && hdr.rtp.isValid()) {
            rtp_select();
        }
        /* index: hdr.bridged.leg straight from the PHV (a copy would cost a stage) */
        if (eg_md.rtp_on == 1) {
            QUALITY_GET(eg_md.rtp_seen, count_packet, hdr.bridged.leg)
        }
        if (eg_md.rtp_on == 1) {
            STEP(rtp_last_seen_step, QUALITY_RUN(touch, hdr.bridged.leg))
        }
        if (eg_md.rtp_on == 1) {
            STEP(rtp_payload_type_step, QUALITY_RUN(store_payload_type, hdr.bridged.leg))
        }
        if (eg_md.rtp_on == 1) {
            QUALITY_GET(eg_md.rtp_transit_abs_d, swap_transit, hdr.bridged.leg)
        }
        if (eg_md.writeback.isValid()) {
            /* the write-back copy's pass: only the jitter (Egress drops it) */
            QUALITY_RUN(write_jitter, eg_md.writeback.leg)
        } else if (eg_md.rtp_on == 1) {
            QUALITY_GET(eg_md.jitter_plus_8, read_jitter, hdr.bridged.leg)
        }
        if (eg_md.rtp_on == 1) {
            if (eg_md.rtp_seen == 0) {
                QUALITY_RUN(seq_first, hdr.bridged.leg)
            } else {
                QUALITY_GET(eg_md.rtp_loss_code, seq_next, hdr.bridged.leg)
            }
        }
        /* the loss code stays 0xFFFF (parser) unless seq_next ran; one
         * 16-bit comparison per condition (gateway input) */
        if (eg_md.rtp_loss_code[15:15] == 0) {
            if (eg_md.rtp_loss_code == 16w0x7FFF) {
                QUALITY_RUN(add_reordered, hdr.bridged.leg)
            } else if (eg_md.rtp_loss_code != 0) {
                QUALITY_RUN(add_lost, hdr.bridged.leg)
            }
        } else if (eg_md.rtp_loss_code != 16w0xFFFF) {
            QUALITY_RUN(add_reordered, hdr.bridged.leg)
        }
        jitter_terms();
        /* a reroute notice (RerouteDetect, before) takes the packet's one
         * mirror: this jitter sample is lost */
        if (eg_md.rtp_seen == 1 && eg_md.rr_notice == 0) {
            jitter_writeback();
        }
    }
}
