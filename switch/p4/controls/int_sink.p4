/* p4relay — INT in Egress, sink: the packet leaves the INT domain, and the
 * report copy becomes a telemetry report (or is dropped).
 *
 * strip (the packet, at a sink port; the parser skipped the hop stack): the
 * shim and MD header go, the DSCP and the UDP checksum come back from them,
 * UDP and IPv4 lengths shrink by the shim's length, the deparser recomputes
 * the IPv4 header checksum: the datagram is the one the source received,
 * with this path's TTL and MACs.
 *
 * report (the copy IntSource mirrored, on its egress pass to the collector's
 * port): suppression in the data plane, per flow slot (mirror header):
 *   int_flow_path       last path signature; a different one: REASON_PATH
 *   int_flow_congested  0/1 with hysteresis: a hop at/over onset sets it
 *                       (REASON_ONSET), no hop over clear clears it
 *                       (REASON_CLEAR), in between it stays
 *   int_flow_reported   last report time (ms); INT_REPORT_INTERVAL_MS after
 *                       it: REASON_INTERVAL (so at most one report per flow
 *                       and interval besides the changes above)
 * No reason: the copy is dropped. Else it is sent to the collector as a
 * Telemetry Report v2.0 (int_report: addresses per collector port; seq_no
 * from int_report_seq), the copied frame with its INT stack as payload.
 *
 * the sink's own hop: the copy's egress pass is the report port's, so the
 * traffic manager's figures there are not the sink port's. Every packet the
 * sink strips records its departure per egress port (int_sink_depth:
 * deq_qdepth, int_sink_latency: deq_timedelta); the copy reads them by the
 * egress port its mirror header names and carries them, with the ports, as
 * the individual report's metadata (rep_md_bits 0-2, md_len 3): the sink
 * port as its last departure left it, which on a queue that builds is one
 * queue's time older than the reported packet's own departure. Registers
 * are per pipe: only a sink port in the report port's pipe is carried (the
 * bootstrap's report session should use a port of the sink ports' pipe);
 * else the report has no metadata (md_len 0). Ingress sets no queue id, so
 * every packet is in queue 0 of its port.
 */
/* Tofino 2: the open-source compiler (9.13.4) stops with an internal error
 * (no input crossbar allocation for the value int_sink_latency's ALU writes)
 * when the sink's hop is built beside IPv6's tables, so its reports carry no
 * metadata there (md_len 0, as for a sink port in another pipe). */
#if __TARGET_TOFINO__ != 2
#define INT_SINK_OWN_HOP
#endif
control IntSink(
        inout egress_headers_t hdr,
        inout egress_metadata_t eg_md,
        in egress_intrinsic_metadata_t eg_intr_md,
        inout egress_intrinsic_metadata_for_deparser_t eg_dprsr_md) {


    @name(".Egress.int_flow_path")
    Register<bit<16>, bit<12>>(INT_FLOW_SLOTS, 0) int_flow_path;
    RegisterAction<bit<16>, bit<12>, bit<8>>(int_flow_path) path_swap = {
        void apply(inout bit<16> stored, out bit<8> changed) {
            if (stored == eg_md.int_sig16) {
                changed = 0;
            } else {
                changed = 1;
            }
            stored = eg_md.int_sig16;
        }
    };

    @name(".Egress.int_flow_congested")
    Register<bit<8>, bit<12>>(INT_FLOW_SLOTS, 0) int_flow_congested;
    /* returns the change: 0 none, 1 clear (want 0), 2 onset (want 1) */
    RegisterAction<bit<8>, bit<12>, bit<8>>(int_flow_congested) congestion = {
        void apply(inout bit<8> state, out bit<8> change) {
            if (eg_md.int_cong_want != 2 && state != eg_md.int_cong_want) {
                state = eg_md.int_cong_want;
                change = eg_md.int_cong_want + 1;
            } else {
                change = 0;
            }
        }
    };

    @name(".Egress.int_flow_reported")
    Register<bit<32>, bit<12>>(INT_FLOW_SLOTS, 0) int_flow_reported;
    RegisterAction<bit<32>, bit<12>, bit<8>>(int_flow_reported) interval = {
        void apply(inout bit<32> last, out bit<8> due) {
            if (eg_md.now_ms - last >= INT_REPORT_INTERVAL_MS) {
                last = eg_md.now_ms;
                due = 1;
            } else {
                due = 0;
            }
        }
    };

    @name(".Egress.int_sink_depth")
    Register<bit<32>, PortId_t>(512, 0) int_sink_depth;
    RegisterAction<bit<32>, PortId_t, bit<32>>(int_sink_depth) depth_write = {
        void apply(inout bit<32> v) {
            v = (bit<32>)eg_intr_md.deq_qdepth;
        }
    };
    RegisterAction<bit<32>, PortId_t, bit<32>>(int_sink_depth) depth_read = {
        void apply(inout bit<32> v, out bit<32> rv) {
            rv = v;
        }
    };

    @name(".Egress.int_sink_latency")
    Register<bit<32>, PortId_t>(512, 0) int_sink_latency;
    /* Egress's queue_delay() copy of deq_timedelta (WITH_INT implies
     * WITH_QUEUE_DELAY): the Tofino 2 compiler finds no input crossbar
     * allocation for the intrinsic field read here beside IPv6's tables. */
    RegisterAction<bit<32>, PortId_t, bit<32>>(int_sink_latency) latency_write = {
        void apply(inout bit<32> v) {
            v = eg_md.queue_delay_ns;
        }
    };
    RegisterAction<bit<32>, PortId_t, bit<32>>(int_sink_latency) latency_read = {
        void apply(inout bit<32> v, out bit<32> rv) {
            rv = v;
        }
    };

    @name(".Egress.int_report_seq")
    Register<bit<32>, bit<1>>(1, 0) int_report_seq;
    RegisterAction<bit<32>, bit<1>, bit<32>>(int_report_seq) next_seq = {
        void apply(inout bit<32> n, out bit<32> before) {
            before = n;
            n = n + 1;
        }
    };

    /* the register steps (EARLY_STEP, profiles.p4) */
#ifdef INT_SINK_OWN_HOP
    EARLY_STEP(int_sink_depth_read_step, eg_md.int_sink_depth = depth_read.execute(eg_md.int_sink_port))
    EARLY_STEP(int_sink_depth_write_step, depth_write.execute(eg_md.int_sink_port))
    EARLY_STEP(int_sink_latency_read_step, eg_md.int_sink_latency = latency_read.execute(eg_md.int_sink_port))
    EARLY_STEP(int_sink_latency_write_step, latency_write.execute(eg_md.int_sink_port))
#endif
    EARLY_STEP(int_flow_path_step,
               eg_md.int_path_changed = path_swap.execute(hdr.int_report_mirror.flow_slot[11:0]))
    EARLY_STEP(int_flow_congested_step,
               eg_md.int_cong_was = congestion.execute(hdr.int_report_mirror.flow_slot[11:0]))
    EARLY_STEP(int_flow_reported_step,
               eg_md.int_interval_due = interval.execute(hdr.int_report_mirror.flow_slot[11:0]))

    /* the ingress parser admitted 1 or 2 hops: 36 or 56 bytes of INT */
    action strip_one_hop() {
        eg_md.int_strip = INT_SOURCE_BYTES;
    }

    action strip_two_hops() {
        eg_md.int_strip = INT_SOURCE_BYTES + INT_HOP_BYTES;
    }

    /* IPv4's DSCP back from the shim (an IPv6 packet's: restore6); the UDP
     * checksum the source found, over IPv6 the datagram's own (no hop
     * rewrites what it covers) */
    action strip() {
        hdr.ipv4.diffserv[7:2] = hdr.int_shim.dscp;
        hdr.udp.checksum = hdr.int_md.ds_instruction;
        hdr.int_shim.setInvalid();
        hdr.int_md.setInvalid();
        eg_md.int_csum = true;
    }

#ifdef WITH_INT6
    /* IPv6's DSCP from the shim, through the hash unit (as the source's
     * keep_dscp6, int_transit.p4), before strip takes the shim away */
    Hash<bit<6>>(HashAlgorithm_t.IDENTITY) shim_dscp_hash;

    action keep_shim_dscp() {
        eg_md.int_shim_dscp = shim_dscp_hash.get({hdr.int_shim.dscp});
    }

    /* IPv6's lengths and DSCP (restore_lengths: IPv4's; the two length
     * fields may share a container: their headers never meet) */
    action restore6() {
        hdr.udp.hdr_length = hdr.udp.hdr_length - eg_md.int_strip;
        hdr.ipv6.payload_len = hdr.ipv6.payload_len - eg_md.int_strip;
        hdr.ipv6.traffic_class[7:2] = eg_md.int_shim_dscp;
    }
#endif

    action restore_lengths() {
        hdr.udp.hdr_length = hdr.udp.hdr_length - eg_md.int_strip;
        hdr.ipv4.total_len = hdr.ipv4.total_len - eg_md.int_strip;
    }

    @name(".Egress.int_report_encap")
    action int_report_encap(mac_addr_t src_mac, mac_addr_t dst_mac,
                            ipv4_addr_t src_addr, ipv4_addr_t dst_addr,
                            l4_port_t dst_port, bit<32> switch_id) {
        hdr.report_ethernet.setValid();
        hdr.report_ethernet.dst_addr = dst_mac;
        hdr.report_ethernet.src_addr = src_mac;
        hdr.report_ethernet.ether_type = ETHERTYPE_IPV4;
        hdr.report_ipv4.setValid();
        hdr.report_ipv4.version = 4;
        hdr.report_ipv4.ihl = 5;
        hdr.report_ipv4.diffserv = 0;
        hdr.report_ipv4.total_len = hdr.int_report_mirror.frame_len + 48;
        hdr.report_ipv4.identification = 0;
        hdr.report_ipv4.flag_reserved = 0;
        hdr.report_ipv4.flag_df = 1;
        hdr.report_ipv4.flag_mf = 0;
        hdr.report_ipv4.frag_offset = 0;
        hdr.report_ipv4.ttl = 64;
        hdr.report_ipv4.protocol = IP_PROTOCOLS_UDP;
        hdr.report_ipv4.hdr_checksum = 0;
        hdr.report_ipv4.src_addr = src_addr;
        hdr.report_ipv4.dst_addr = dst_addr;
        hdr.report_udp.setValid();
        hdr.report_udp.src_port = dst_port;
        hdr.report_udp.dst_port = dst_port;
        hdr.report_udp.hdr_length = hdr.int_report_mirror.frame_len + 28;
        hdr.report_udp.checksum = 0;
        hdr.report_group.setValid();
        hdr.report_group.ver = 2;
        hdr.report_group.hw_id = 0;
        hdr.report_group.node_id = switch_id;
        hdr.report_individual.setValid();
        hdr.report_individual.rep_type = 1;
        hdr.report_individual.in_type = 3;
        hdr.report_individual.md_len = 0;
        hdr.report_individual.d = 0;
        hdr.report_individual.q = 0;
        hdr.report_individual.f = 1;
        hdr.report_individual.i = 1;
        hdr.report_individual.rsvd = 0;
        hdr.report_individual.rep_md_bits = 0;
        hdr.report_individual.ds_id = INT_DS_ID;
        hdr.report_individual.ds_md_bits = 0;
        hdr.report_individual.ds_md_status = 0;
    }

    @name(".Egress.int_report")
    table int_report {
        key = {
            eg_intr_md.egress_port : exact;
        }
        actions = {
            int_report_encap;
            @defaultonly NoAction;
        }
        default_action = NoAction();
        size = INT_PORT_TABLE_SIZE;
    }

    action rep_words() {
        eg_md.int_rep_words = hdr.int_report_mirror.frame_len + 15;
    }

    /* with the sink's hop: 3 words more */
    action rep_words_md() {
        eg_md.int_rep_words = hdr.int_report_mirror.frame_len + 27;
        eg_md.int_sink_md = 1;
    }

    /* after int_report_encap made the headers valid */
    action sink_md() {
        hdr.report_sink_md.setValid();
        hdr.report_sink_md.ingress_port = (bit<16>)hdr.int_report_mirror.ingress_port;
        hdr.report_sink_md.egress_port = (bit<16>)hdr.int_report_mirror.egress_port;
        hdr.report_sink_md.hop_latency = eg_md.int_sink_latency;
        hdr.report_sink_md.queue_id = 0;
        hdr.report_sink_md.queue_occupancy = eg_md.int_sink_depth[23:0];
        hdr.report_ipv4.total_len = hdr.report_ipv4.total_len + 12;
        hdr.report_udp.hdr_length = hdr.report_udp.hdr_length + 12;
        hdr.report_individual.md_len = INT_REPORT_MD_WORDS;
        hdr.report_individual.rep_md_bits = INT_REPORT_MD_BITS;
    }

    /* after int_report_encap made the headers valid */
    action report_fields() {
        hdr.report_group.seq_no = eg_md.int_seq[21:0];
        /* words after the group header: 3 + frame, rounded up */
        hdr.report_individual.rep_len = (bit<8>)(eg_md.int_rep_words >> 2);
    }

    action suppress() {
        eg_dprsr_md.drop_ctl = 1;
    }

    action want_onset() {
        eg_md.int_cong_want = 1;
    }

    action want_clear() {
        eg_md.int_cong_want = 0;
    }

    /* Single-stage items gated by header bits (the report copy's mirror
     * header, the sink role), so IntSink interleaves with the other
     * features (Tofino 1 has no long branches). Report chain: the three
     * suppression registers (int_flow_reported after the ms clock) -> the
     * verdict with int_report_seq and int_report -> seq_no and length. */
    apply {
#ifdef INT_SINK_OWN_HOP
        if (hdr.int_report_mirror.isValid()
                && eg_md.int_sink_port[8:7] == eg_intr_md.egress_port[8:7]) {
            rep_words_md();
        } else
#endif
        {
            rep_words();
        }
#ifdef INT_SINK_OWN_HOP
        /* the sink's hop: written by the packets it strips, read by the
         * report copies (index: the sink port, from the parser) */
        if (hdr.int_report_mirror.isValid()) {
            int_sink_depth_read_step.apply();
        } else if (hdr.int_bridged.isValid() && hdr.int_bridged.sink == 1
                && hdr.int_md.isValid()) {
            int_sink_depth_write_step.apply();
        }
        if (hdr.int_report_mirror.isValid()) {
            int_sink_latency_read_step.apply();
        } else if (hdr.int_bridged.isValid() && hdr.int_bridged.sink == 1
                && hdr.int_md.isValid()) {
            int_sink_latency_write_step.apply();
        }
#endif
#ifdef WITH_INT6
        keep_shim_dscp();
#endif
        eg_md.int_sig16 = hdr.int_report_mirror.ds_flags & INT_SIG_MASK;
        if (hdr.int_report_mirror.isValid()) {
            if (hdr.int_report_mirror.ds_flags & INT_FLAG_ONSET != 0) {
                want_onset();
            } else if (hdr.int_report_mirror.ds_flags & INT_FLAG_OVER_CLEAR == 0) {
                want_clear();
            }
        }
        if (hdr.int_report_mirror.isValid()) {
            int_flow_path_step.apply();
        }
        if (hdr.int_report_mirror.isValid()) {
            int_flow_congested_step.apply();
        }
        if (hdr.int_report_mirror.isValid()) {
            int_flow_reported_step.apply();
        }
        if (hdr.int_report_mirror.isValid()) {
            if (eg_md.int_interval_due == 0 && eg_md.int_path_changed == 0
                    && eg_md.int_cong_was == 0) {
                /* no reason: suppressed */
                suppress();
            } else {
                eg_md.int_seq = next_seq.execute(0);
                if (!int_report.apply().hit) {
                    suppress();   /* no collector on this port */
                }
            }
        }
        if (hdr.report_group.isValid()) {
            report_fields();
        }
        if (hdr.report_group.isValid() && eg_md.int_sink_md == 1) {
            sink_md();
        }
        if (hdr.int_bridged.isValid() && hdr.int_bridged.sink == 1 && hdr.int_md.isValid()) {
            if (hdr.int_md.remaining_hop_cnt == 1) {
                strip_one_hop();
            } else {
                strip_two_hops();
            }
            strip();
        }
        if (eg_md.int_strip != 0) {
#ifdef WITH_INT6
            if (hdr.ipv6.isValid()) {
                restore6();
            } else {
                restore_lengths();
            }
#else
            restore_lengths();
#endif
        }
    }
}
