/* p4relay — iRED: ingress-drop active queue management (de Almeida et al.,
 * CNSM 2022, Algorithms 1 and 2), with media protection.
 *
 * Ired (in Egress) decides; IredDrop (in Ingress) drops.
 *
 * Ired, for every packet leaving a port that has a pipe.Egress.ired_port
 * entry (Algorithm 1):
 *   minThsld = maxLenQueue / 2 - N, maxThsld = 2 * minThsld;
 *   qAvg = oldQdepth * (1 - 2^-n) + qdepth * 2^-n, where qdepth is
 *   eg_intr_md.deq_qdepth (cells: the queue as the deciding packet leaves
 *   it; enq_qdepth, the queue as that packet found it one sojourn earlier,
 *   with -DIRED_SAMPLE_ENQ, measured against it in docs/design/ired.md) and
 *   oldQdepth the port's previous sample (ired_qdepth_prev), as the
 *   authors' program keeps it. A recursive
 *   average would need the stored value shifted by n inside the register's
 *   ALU, which Tofino 1's stateful ALU cannot do (rtp_quality.p4 explains the
 *   same limit for the jitter). In integers (the paper's x10 form only
 *   avoids fractions): qAvg = oldQdepth - (oldQdepth >> n) + (qdepth >> n),
 *   each shift truncating (under one cell off for n = 1).
 *   Between the thresholds the packet decides a drop when a 16-bit random
 *   number is below the port's ired_drop_prob (chance x 65536); above
 *   maxThsld always. A decision is an egress-to-egress mirror copy with
 *   ired_feedback_h (session IRED_SESSION_BASE + pipe, to the pipe's
 *   recirculation port); the packet itself leaves unchanged. A relayed RTP
 *   packet already carries the jitter write-back copy (one mirror per packet
 *   on Tofino 1), so it never carries a decision: the next packet does.
 *   tail_drop = 1: no decisions; a packet that found enq_qdepth >=
 *   maxLenQueue when it was queued is dropped here. Not a queue of
 *   maxLenQueue: such a packet has waited in the traffic manager's queue
 *   like any other and counts in the enq_qdepth of those behind it. A
 *   buffer of maxLenQueue is the queue's own limit in the traffic manager.
 *
 * IredDrop (Algorithm 2): the recirculated copy sets the port's flag in
 * ired_drop_flag (1, or 3 when the port protects media) and is dropped. The
 * next packet routed to a flagged port is dropped and clears the flag. With
 * protection, packets that hit pipe.Ingress.relay (offloaded calls), packets
 * marked DSCP EF and the operator's signalling class (pipe.Ingress.ired_spare:
 * ternary on the DSCP of either family and the UDP ports, e.g. CS3 or port
 * 5060/5061: SIP, whose loss costs a call set-up a retransmission timer) are
 * never dropped by the flag: they pass, are counted in ired_spared, and the
 * flag waits for the next other packet.
 *
 * The counts (ired_decisions, ired_tail_drops, ired_flags_set, ired_drops,
 * ired_spared) are packet Counters: a statistics ALU each, not one of the
 * four stateful ALUs a Tofino 1 stage has for both gresses, which iRED's
 * flag and average and the RTP quality registers need in the last stages.
 *
 * Every register and counter is indexed by the 9-bit dev_port, one copy per
 * pipe. The flag lives in the ingress pipe the copy re-enters (the pipe of the mirror
 * session's recirculation port): on a multi-pipe switch, point the port's
 * session at the pipe its bulk traffic enters through (README "iRED").
 */

control Ired(
        in egress_headers_t hdr,
        inout egress_metadata_t eg_md,
        in egress_intrinsic_metadata_t eg_intr_md,
        inout egress_intrinsic_metadata_for_deparser_t eg_dprsr_md) {

    Random<bit<16>>() rng;
    /* the 19-bit queue depths widened to whole 32-bit containers (through
     * the hash unit: a cast in an action would write half a container);
     * widen_deq widens the sample, whichever depth the build averages */
    Hash<bit<32>>(HashAlgorithm_t.IDENTITY) widen_deq;
    Hash<bit<32>>(HashAlgorithm_t.IDENTITY) widen_enq;

    @name(".Egress.ired_set")
    action ired_set(bit<32> max_len_queue, bit<32> n_drop, bit<3> ewma_n,
                    bit<1> tail_drop, bit<1> protect) {
        eg_md.ired_on = 1;
        eg_md.ired_max_len = max_len_queue;
        eg_md.ired_n_drop = n_drop;
        eg_md.ired_ewma_n = ewma_n;
        eg_md.ired_tail_drop = tail_drop;
        eg_md.ired_protect = protect;
    }

    @name(".Egress.ired_port")
    table ired_port {
        key = {
            eg_intr_md.egress_port : exact;
        }
        actions = {
            ired_set;
            NoAction;
        }
        default_action = NoAction();
        size = IRED_PORTS;
    }

    @name(".Egress.ired_qdepth_prev")
    Register<bit<32>, PortId_t>(IRED_PORTS, 0) ired_qdepth_prev;
    RegisterAction<bit<32>, PortId_t, bit<32>>(ired_qdepth_prev) swap_sample = {
        void apply(inout bit<32> prev, out bit<32> old) {
            old = prev;
            prev = eg_md.ired_cur;
        }
    };

    @name(".Egress.ired_qavg")
    Register<bit<32>, PortId_t>(IRED_PORTS, 0) ired_qavg;
    RegisterAction<bit<32>, PortId_t, bit<32>>(ired_qavg) store_avg = {
        void apply(inout bit<32> avg) {
            avg = eg_md.ired_avg;
        }
    };

    @name(".Egress.ired_drop_prob")
    Register<bit<16>, PortId_t>(IRED_PORTS, 0) ired_drop_prob;
    RegisterAction<bit<16>, PortId_t, bit<8>>(ired_drop_prob) flip_coin = {
        void apply(inout bit<16> prob, out bit<8> hit) {
            if (eg_md.ired_rand < prob) {
                hit = 1;
            } else {
                hit = 0;
            }
        }
    };

    @name(".Egress.ired_decisions")
    Counter<bit<32>, PortId_t>(IRED_PORTS, CounterType_t.PACKETS) ired_decisions;

    @name(".Egress.ired_tail_drops")
    Counter<bit<32>, PortId_t>(IRED_PORTS, CounterType_t.PACKETS) ired_tail_drops;

    /* one immediate source (hash or random) per action */
    /* the depth averaged: deq_qdepth, or enq_qdepth in a build with
     * -DIRED_SAMPLE_ENQ (comparisons; the softswitch's --ired-sample enq) */
    action sample() {
#ifdef IRED_SAMPLE_ENQ
        eg_md.ired_cur = widen_deq.get({13w0, eg_intr_md.enq_qdepth});
#else
        eg_md.ired_cur = widen_deq.get({13w0, eg_intr_md.deq_qdepth});
#endif
    }

    action sample_enq() {
        eg_md.ired_enq = widen_enq.get({13w0, eg_intr_md.enq_qdepth});
    }

    action draw() {
        eg_md.ired_rand = rng.get();
    }

    action half_and_room() {
        eg_md.ired_half = eg_md.ired_max_len >> 1;
        eg_md.ired_room = eg_md.ired_max_len |-| eg_md.ired_enq;
    }

    /* >> n by constant shifts, one action per n (no variable shifts) */
    action shr_1() {
        eg_md.ired_prev_decay = eg_md.ired_prev >> 1;
        eg_md.ired_cur_n = eg_md.ired_cur >> 1;
    }
    action shr_2() {
        eg_md.ired_prev_decay = eg_md.ired_prev >> 2;
        eg_md.ired_cur_n = eg_md.ired_cur >> 2;
    }
    action shr_3() {
        eg_md.ired_prev_decay = eg_md.ired_prev >> 3;
        eg_md.ired_cur_n = eg_md.ired_cur >> 3;
    }
    action shr_4() {
        eg_md.ired_prev_decay = eg_md.ired_prev >> 4;
        eg_md.ired_cur_n = eg_md.ired_cur >> 4;
    }

    action min_thsld() {
        eg_md.ired_min = eg_md.ired_half - eg_md.ired_n_drop;
        eg_md.ired_prev_kept = eg_md.ired_prev - eg_md.ired_prev_decay;
    }

    action average() {
        eg_md.ired_avg = eg_md.ired_prev_kept + eg_md.ired_cur_n;
        eg_md.ired_max = eg_md.ired_min << 1;
    }

    action compare() {
        eg_md.ired_below = eg_md.ired_min |-| eg_md.ired_avg;
        eg_md.ired_above = eg_md.ired_avg |-| eg_md.ired_max;
    }

    /* 0: minThsld <= qAvg <= maxThsld (one 32-bit gateway operand) */
    action in_band() {
        eg_md.ired_band = eg_md.ired_below | eg_md.ired_above;
    }

    /* flag 1, or 3 = spare protected: the parser's 1 with protect as bit 1 */
    action flag_value() {
        eg_md.ired_flag[1:1] = eg_md.ired_protect;
    }

    /* packets this port's iRED may decide on: not in tail-drop mode, and
     * not relayed RTP (it carries the jitter write-back copy: one mirror
     * per packet on Tofino 1) */
    action eligible() {
        eg_md.ired_eligible = 1;
    }

    action tail_dropped() {
        eg_dprsr_md.drop_ctl = 1;
    }

    /* the feedback copy; a packet that carries a reroute notice carries no
     * decision (one mirror per packet): the next packet does */
    action decide() {
        eg_md.ired_mirror.setValid();
        eg_md.ired_mirror.pkt_type = PKT_TYPE_IRED_FEEDBACK;
        eg_md.ired_mirror._pad = 0;
        eg_md.ired_mirror.flag = eg_md.ired_flag;
        eg_md.ired_mirror.port = eg_intr_md.egress_port;
        eg_dprsr_md.mirror_type = MIRROR_TYPE_IRED;
    }

    /* Single-stage items, each gated by ired_on (the port's ired_port
     * entry) or a bit derived from it: the arithmetic runs for every packet
     * (it only writes Ired's own metadata), so the chain interleaves with
     * the other features' (Tofino 1 has no long branches). Chain:
     * ired_port -> ired_qdepth_prev -> shift -> prev - (prev >> n) -> qAvg
     * -> compare -> band -> ired_drop_prob (coin) -> decision. */
    apply {
        /* unconditional: they need nothing, so they share stage 0 with ired_port */
        sample();
        sample_enq();
        draw();
        if (hdr.bridged.isValid()) {
            ired_port.apply();
        }
        if (eg_md.ired_on == 1) {
            eg_md.ired_prev = swap_sample.execute(eg_intr_md.egress_port);
        }
        flag_value();
        if (eg_md.ired_on == 1 && eg_md.ired_tail_drop == 0
                && !(hdr.bridged.relay == 1 && hdr.bridged.rtcp == 0 && hdr.rtp.isValid())) {
            eligible();
        }
        half_and_room();
        if (eg_md.ired_on == 1 && eg_md.ired_tail_drop == 1) {
            if (eg_md.ired_room == 0) {
                tail_dropped();
                ired_tail_drops.count(eg_intr_md.egress_port);
            }
        }
        if (eg_md.ired_ewma_n == 1) {
            shr_1();
        } else if (eg_md.ired_ewma_n == 2) {
            shr_2();
        } else if (eg_md.ired_ewma_n == 3) {
            shr_3();
        } else {
            shr_4();
        }
        min_thsld();
        average();
        compare();
        in_band();
        /* after in_band in program order: a register step is placed where
         * its RAM fits, and a step after it in the sequence waits for it */
        if (eg_md.ired_on == 1) {
            store_avg.execute(eg_intr_md.egress_port);
        }
        if (eg_md.ired_eligible == 1 && eg_md.ired_band == 0) {
            eg_md.ired_coin = flip_coin.execute(eg_intr_md.egress_port);
        }
        if (eg_md.ired_eligible == 1 && eg_md.rr_notice == 0) {
            if (eg_md.ired_above != 0) {
                decide();
                ired_decisions.count(eg_intr_md.egress_port);
            } else if (eg_md.ired_coin == 1) {
                decide();
                ired_decisions.count(eg_intr_md.egress_port);
            }
        }
    }
}

/* The signalling class iRED spares on a protecting port (ired_spare) and
 * the DSCP of either family: header fields only, so Ingress applies it at
 * the start of its IP chain, beside the relay tables (IredDrop, after the
 * whole chain, only reads ired_sip and dscp). */
control IredSpare(
        in ingress_headers_t hdr,
        inout ingress_metadata_t ig_md) {

    /* the DSCP of either family, one key for ired_spare */
    action dscp4() {
        ig_md.dscp = hdr.ipv4.diffserv[7:2];
    }
#ifdef WITH_IPV6
    action dscp6() {
        ig_md.dscp = hdr.ipv6.traffic_class[7:2];
    }
#endif

    @name(".Ingress.ired_spare_packet")
    action ired_spare_packet() {
        ig_md.ired_sip = true;
    }

    /* The signalling class iRED spares on a protecting port: header fields
     * only, so it is looked up early, beside the relay tables. UDP ports
     * are 0 for other packets (SIP over TCP/TLS: by its DSCP). */
    @name(".Ingress.ired_spare")
    /* Tofino 1 with IPv6: a stage whose TCAM the LPM tables and watch lists
     * leave free (profiles.p4) */
    STAGE_T1_IPV6(3)
    table ired_spare {
        key = {
            ig_md.dscp : ternary;
            ig_md.l4_src_port : ternary;
            ig_md.l4_dst_port : ternary;
        }
        actions = {
            ired_spare_packet;
            NoAction;
        }
        default_action = NoAction();
        size = IRED_SPARE_TABLE_SIZE;
    }

    apply {
        if (hdr.ipv4.isValid()) {
            dscp4();
        }
#ifdef WITH_IPV6
        if (hdr.ipv6.isValid()) {
            dscp6();
        }
#endif
        ired_spare.apply();
    }
}

control IredDrop(
        in ingress_headers_t hdr,
        inout ingress_metadata_t ig_md,
        in ingress_intrinsic_metadata_for_tm_t ig_tm_md,
        inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md) {

    @name(".Ingress.ired_drop_flag")
    Register<bit<8>, PortId_t>(IRED_PORTS, 0) ired_drop_flag;
    RegisterAction<bit<8>, PortId_t, bit<8>>(ired_drop_flag) set_flag = {
        void apply(inout bit<8> flag) {
            flag = (bit<8>)hdr.ired_feedback.flag;
        }
    };
    /* an eligible packet takes the flag */
    RegisterAction<bit<8>, PortId_t, bit<8>>(ired_drop_flag) take_flag = {
        void apply(inout bit<8> flag, out bit<8> found) {
            found = flag;
            flag = 0;
        }
    };
    /* a protected packet takes only a flag set without protection */
    RegisterAction<bit<8>, PortId_t, bit<8>>(ired_drop_flag) peek_flag = {
        void apply(inout bit<8> flag, out bit<8> found) {
            found = flag;
            if (flag == 1) {
                flag = 0;
            }
        }
    };


    @name(".Ingress.ired_flags_set")
    Counter<bit<32>, PortId_t>(IRED_PORTS, CounterType_t.PACKETS) ired_flags_set;

    @name(".Ingress.ired_drops")
    Counter<bit<32>, PortId_t>(IRED_PORTS, CounterType_t.PACKETS) ired_drops;

    @name(".Ingress.ired_spared")
    Counter<bit<32>, PortId_t>(IRED_PORTS, CounterType_t.PACKETS) ired_spared;

    action protect_packet() {
        ig_md.ired_protected = true;
    }

    action drop_packet() {
        ig_dprsr_md.drop_ctl = 1;
    }

    /* single-stage items (Tofino 1 has no long branches): the flag
     * register (one of its actions, by the packet), then its counters */
    apply {
        if (hdr.ired_feedback.isValid()) {
            /* Algorithm 2, lines 2-4: the recirculated copy sets the flag and ends */
            set_flag.execute(hdr.ired_feedback.port);
            ired_flags_set.count(hdr.ired_feedback.port);
            ig_dprsr_md.drop_ctl = 1;
        } else if (ig_md.forwarded && !ig_md.guard_drop) {
            /* lines 7-10, for a packet Forwarding routed and nothing dropped
             * (bits set before nexthop's stage: no wait for drop_ctl) */
            /* ig_md.dscp: IredSpare's copy of either family's DSCP (four
             * terms: one gateway) */
#ifdef WITH_IPV6
            if (ig_md.relay_hit || ig_md.relay6_hit || ig_md.ired_sip
                    || ig_md.dscp == DSCP_EF) {
#else
            if (ig_md.relay_hit || ig_md.ired_sip || ig_md.dscp == DSCP_EF) {
#endif
                protect_packet();
                ig_md.ired_flag = peek_flag.execute(ig_tm_md.ucast_egress_port);
            } else {
                ig_md.ired_flag = take_flag.execute(ig_tm_md.ucast_egress_port);
            }
        }
        /* the next stage: ired_flag stays 0 (parser) unless a flag was taken;
         * two conditions that exclude each other, not an if/else, so both
         * counters share that stage */
        if (ig_md.ired_flag == 1 || (ig_md.ired_flag == 3 && !ig_md.ired_protected)) {
            drop_packet();
            ired_drops.count(ig_tm_md.ucast_egress_port);
        }
        if (ig_md.ired_flag == 3 && ig_md.ired_protected) {
            ired_spared.count(ig_tm_md.ucast_egress_port);
        }
    }
}
