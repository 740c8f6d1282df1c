/* p4relay — INT in Egress, source and transit: this switch's hop.
 *
 * A packet Ingress marked (hdr.int_bridged) leaving by a transit port of
 * the INT domain (an int_hop entry for the port gives the switch id and the
 * thresholds):
 *  - source (watched, no INT yet): insert the shim and the MD header; the
 *    shim keeps the DSCP, ds_instruction the UDP checksum (which becomes 0
 *    over IPv4; over IPv6 it stays, see below), the DSCP becomes INT_DSCP;
 *    then as transit;
 *  - transit: push this hop (int_hop_h, 20 bytes, right after the MD
 *    header: newest first), lengths grow by 40; with no hop left
 *    (remaining_hop_cnt 0) set the E bit instead and count int_hop_limit.
 * The hop carries the queue as the packet left it: deq_qdepth (occupancy
 * at dequeue) and the egress queue id; hop latency = queue_delay_ns
 * (Egress: deq_timedelta, the time the packet spent in the egress queue).
 * The hop ORs its threshold
 * verdicts into ds_flags (onset: depth >= onset_cells or latency >=
 * onset_ns, with the bit of its place from the source; over clear: depth >
 * clear_cells or latency > clear_ns) and XORs its path word (switch id, low
 * 12 bits) into the path signature; the sink's suppression reads both, its
 * reroute detection the onset bits (naming the hop in its notice).
 * int_tx_bytes counts every byte a port sends (the hop's utilisation field).
 * IPv6 (RFC 8200 8.1: no zero UDP checksum): whatever the hop did (source,
 * transit, the E bit) is folded into the UDP checksum by the egress
 * deparser (udp6_checksum: the parser's residual without the payload
 * length (the pseudo-header's copy of the UDP length), UDP length, shim
 * and MD header it found, plus their new values and this hop); payload_len
 * grows with the UDP length.
 */
/* the hop's ports are written zero-extended (constant + PHV): the switch id
 * must not share their container */
@pa_solitary("egress", "hdr.int_hop.switch_id")
@pa_solitary("egress", "hdr.int_hop.ingress_port")
@pa_solitary("egress", "hdr.int_hop.egress_port")
control IntTransit(
        inout egress_headers_t hdr,
        inout egress_metadata_t eg_md,
        in egress_intrinsic_metadata_t eg_intr_md,
        in egress_intrinsic_metadata_from_parser_t eg_prsr_md) {

    @name(".Egress.int_tx_bytes")
    Register<bit<32>, PortId_t>(512, 0) int_tx_bytes;
    RegisterAction<bit<32>, PortId_t, bit<32>>(int_tx_bytes) count_tx = {
        void apply(inout bit<32> n, out bit<32> total) {
            n = n + (bit<32>)eg_intr_md.pkt_length;
            total = n;
        }
    };

    @name(".Egress.int_hop_limit")
    Register<bit<32>, bit<1>>(1, 0) int_hop_limit;
    RegisterAction<bit<32>, bit<1>, bit<32>>(int_hop_limit) count_hop_limit = {
        void apply(inout bit<32> n) {
            n = n + 1;
        }
    };

    bit<32> tx_total = 0;

    @name(".Egress.int_hop")
    action int_hop(bit<32> switch_id, bit<32> onset_cells, bit<32> clear_cells,
                   bit<32> onset_ns, bit<32> clear_ns) {
        eg_md.int_on = 1;
        eg_md.int_csum = true;
        eg_md.int_switch_id = switch_id;
        eg_md.int_word = (bit<16>)switch_id[11:0];
        eg_md.int_onset_cells_d = onset_cells |-| (bit<32>)eg_intr_md.deq_qdepth;
        eg_md.int_clear_cells_d = clear_cells;
        eg_md.int_onset_ns_d = onset_ns |-| eg_md.queue_delay_ns;
        eg_md.int_clear_ns_d = clear_ns;
    }

    action over_clear() {
        eg_md.int_clear_cells_d = (bit<32>)eg_intr_md.deq_qdepth |-| eg_md.int_clear_cells_d;
        eg_md.int_clear_ns_d = eg_md.queue_delay_ns |-| eg_md.int_clear_ns_d;
    }

    @name(".Egress.int_hop_config")
    table int_hop_config {
        key = {
            eg_intr_md.egress_port : exact;
        }
        actions = {
            int_hop;
            @defaultonly NoAction;
        }
        default_action = NoAction();
        size = INT_PORT_TABLE_SIZE;
    }

    /* the hop's fields from PHV (deposits into zeroed fields come next) */
    #define INT_PUSH_HOP \
        hdr.int_hop.setValid(); \
        hdr.int_hop.switch_id = eg_md.int_switch_id; \
        hdr.int_hop.ingress_port = hdr.int_bridged.ingress_port; \
        hdr.int_hop.egress_port = 0; \
        hdr.int_hop.queue_id = 0; \
        hdr.int_hop.queue_occupancy = 0; \
        hdr.int_hop.hop_latency = eg_md.queue_delay_ns; \
        hdr.int_hop.tx_bytes = tx_total;

#ifdef WITH_INT6
    /* IPv6's payload length (UDP right after the fixed header: the UDP
     * length, which the checksum's pseudo-header carries as well) */
    #define INT_GROW_V6(n) \
        hdr.ipv6.payload_len = hdr.ipv6.payload_len + n;
#endif

    /* the source's shim and MD header, all but the original DSCP and the
     * family's own fields (path signature = this hop's word), this hop, the
     * lengths of all of it */
    #define INT_SOURCE_HEADERS \
        hdr.int_shim.setValid(); \
        hdr.int_shim.int_type = INT_TYPE_MD; \
        hdr.int_shim.npt = 0; \
        hdr.int_shim.rsvd = 0; \
        hdr.int_shim.len = 4 + (bit<8>)INT_HOP_WORDS; \
        hdr.int_shim.rsvd2 = 0; \
        hdr.int_shim.rsvd3 = 0; \
        hdr.int_md.setValid(); \
        hdr.int_md.ver = INT_VERSION; \
        hdr.int_md.d = 0; \
        hdr.int_md.e = 0; \
        hdr.int_md.m = 0; \
        hdr.int_md.rsvd = 0; \
        hdr.int_md.hop_ml = INT_HOP_WORDS; \
        hdr.int_md.remaining_hop_cnt = INT_MAX_HOPS - 1; \
        hdr.int_md.instruction_bitmap = INT_INSTRUCTIONS; \
        hdr.int_md.ds_id = INT_DS_ID; \
        hdr.int_md.ds_instruction = hdr.udp.checksum; \
        hdr.int_md.ds_flags = eg_md.int_word; \
        eg_md.int_onset_bits = INT_FLAG_ONSET | INT_FLAG_ONSET_HOP1; \
        hdr.udp.hdr_length = hdr.udp.hdr_length + INT_SOURCE_BYTES; \
        INT_PUSH_HOP

    /* source over IPv4: the UDP checksum becomes 0 (IPv4 allows it) */
    action source_hop() {
        hdr.int_shim.setValid();
        hdr.int_shim.int_type = INT_TYPE_MD;
        hdr.int_shim.npt = 0;
        hdr.int_shim.rsvd = 0;
        hdr.int_shim.len = 4 + (bit<8>)INT_HOP_WORDS;
        hdr.int_shim.rsvd2 = 0;
        hdr.int_shim.dscp = hdr.ipv4.diffserv[7:2];
        hdr.int_shim.rsvd3 = 0;
        hdr.int_md.setValid();
        hdr.int_md.ver = INT_VERSION;
        hdr.int_md.d = 0;
        hdr.int_md.e = 0;
        hdr.int_md.m = 0;
        hdr.int_md.rsvd = 0;
        hdr.int_md.hop_ml = INT_HOP_WORDS;
        hdr.int_md.remaining_hop_cnt = INT_MAX_HOPS - 1;
        hdr.int_md.instruction_bitmap = INT_INSTRUCTIONS;
        hdr.int_md.ds_id = INT_DS_ID;
        hdr.int_md.ds_instruction = hdr.udp.checksum;
        hdr.int_md.ds_flags = eg_md.int_word;
        /* the source's hop is the first from the source */
        eg_md.int_onset_bits = INT_FLAG_ONSET | INT_FLAG_ONSET_HOP1;
        hdr.udp.checksum = 0;
        hdr.ipv4.diffserv[7:2] = INT_DSCP;
        hdr.udp.hdr_length = hdr.udp.hdr_length + INT_SOURCE_BYTES;
        hdr.ipv4.total_len = hdr.ipv4.total_len + INT_SOURCE_BYTES;
        INT_PUSH_HOP
    }

#ifdef WITH_INT6
    /* the traffic class for the shim's DSCP (source_hop6 writes constants
     * beside it: one PHV source, aligned: the whole byte, DSCP in its bits
     * 7..2 as in the shim), through the hash unit: a PHV move would tie the
     * traffic class (which straddles two bytes), the shim's DSCP and IPv4's
     * into one cluster the compiler cannot slice */
    Hash<bit<8>>(HashAlgorithm_t.IDENTITY) tc6_hash;

    action keep_dscp6() {
        eg_md.int_tc6 = tc6_hash.get({hdr.ipv6.traffic_class});
    }

    /* source over IPv6: the UDP checksum stays (ds_instruction keeps it for
     * the sink); the deparser folds what this adds into it (int_udp6) */
    action source_hop6() {
        INT_SOURCE_HEADERS
        hdr.int_shim.dscp = eg_md.int_tc6[7:2];
        hdr.ipv6.traffic_class[7:2] = INT_DSCP;
        INT_GROW_V6(INT_SOURCE_BYTES)
    }

    action udp6_update() {
        eg_md.int_udp6 = true;
    }
#endif

    /* transit: this hop on top of the stack, its word into the signature */
    action transit_hop() {
        hdr.int_shim.len = hdr.int_shim.len + (bit<8>)INT_HOP_WORDS;
        hdr.int_md.remaining_hop_cnt = hdr.int_md.remaining_hop_cnt - 1;
        hdr.int_md.ds_flags = hdr.int_md.ds_flags ^ eg_md.int_word;
        /* a transit's hop is the second (INT_MAX_HOPS 2) */
        eg_md.int_onset_bits = INT_FLAG_ONSET | INT_FLAG_ONSET_HOP2;
        hdr.udp.hdr_length = hdr.udp.hdr_length + INT_HOP_BYTES;
        hdr.ipv4.total_len = hdr.ipv4.total_len + INT_HOP_BYTES;
        INT_PUSH_HOP
    }

#ifdef WITH_INT6
    /* transit over IPv6: each family's length in an action of its own (the
     * two length fields may share a container: their headers never meet) */
    action transit_hop6() {
        hdr.int_shim.len = hdr.int_shim.len + (bit<8>)INT_HOP_WORDS;
        hdr.int_md.remaining_hop_cnt = hdr.int_md.remaining_hop_cnt - 1;
        hdr.int_md.ds_flags = hdr.int_md.ds_flags ^ eg_md.int_word;
        eg_md.int_onset_bits = INT_FLAG_ONSET | INT_FLAG_ONSET_HOP2;
        hdr.udp.hdr_length = hdr.udp.hdr_length + INT_HOP_BYTES;
        INT_GROW_V6(INT_HOP_BYTES)
        INT_PUSH_HOP
    }
#endif

    /* zero-extended: a deposit needs the (zeroed) container as background */
    action hop_queue() {
        hdr.int_hop.egress_port[8:0] = eg_intr_md.egress_port;
        hdr.int_hop.queue_occupancy[18:0] = eg_intr_md.deq_qdepth;
    }

    /* shares its container with queue_occupancy: a deposit of its own */
    action hop_queue_id() {
        /* QueueId_t: 5 bits on Tofino 1, 7 on Tofino 2 */
        hdr.int_hop.queue_id[QUEUE_ID_WIDTH - 1:0] = eg_intr_md.egress_qid;
    }

    /* the onset bit and this hop's place from the source (int_onset_bits,
     * set where the hop was pushed) */
    action flag_onset() {
        hdr.int_md.ds_flags = hdr.int_md.ds_flags | eg_md.int_onset_bits;
    }

    action flag_over_clear() {
        hdr.int_md.ds_flags = hdr.int_md.ds_flags | INT_FLAG_OVER_CLEAR;
    }

    action hop_limit() {
        hdr.int_md.e = 1;
    }

    /* Single-stage items gated by header bits and int_on (the port's
     * int_hop_config entry), so the hop's stages interleave with the other
     * features' (Tofino 1 has no long branches). */
    apply {
#ifdef WITH_INT6
        keep_dscp6();
#endif
        /* every packet but the sink's (stripped) and the report copies */
        if (!hdr.int_report_mirror.isValid()
                && !(hdr.int_bridged.isValid() && hdr.int_bridged.sink == 1)) {
            tx_total = count_tx.execute(eg_intr_md.egress_port);
        }
        if (hdr.int_bridged.isValid() && hdr.int_bridged.transit == 1
                && (hdr.int_bridged.source == 1 || hdr.int_md.isValid())) {
            int_hop_config.apply();
        }
        over_clear();
        if (eg_md.int_on == 1) {
            if (hdr.int_bridged.source == 1) {
#ifdef WITH_INT6
                if (hdr.ipv6.isValid()) {
                    source_hop6();
                } else {
                    source_hop();
                }
#else
                source_hop();
#endif
            } else if (hdr.int_md.isValid() && hdr.int_shim.isValid()) {
                if (hdr.int_md.remaining_hop_cnt == 0) {
                    hop_limit();
                    count_hop_limit.execute(0);
                } else {
#ifdef WITH_INT6
                    if (hdr.ipv6.isValid()) {
                        transit_hop6();
                    } else {
                        transit_hop();
                    }
#else
                    transit_hop();
#endif
                }
            }
        }
#ifdef WITH_INT6
        /* IPv6: whatever this hop did to the stack (source, transit, the E
         * bit) goes into the UDP checksum in the deparser */
        if (eg_md.int_on == 1 && hdr.ipv6.isValid()) {
            udp6_update();
        }
#endif
        /* int_hop is valid only where this switch pushed it (the parser
         * never extracts a hop) */
        if (hdr.int_hop.isValid()) {
            hop_queue();
        }
        if (hdr.int_hop.isValid()) {
            hop_queue_id();
        }
        /* one 32-bit comparison per condition (gateway input) */
        if (hdr.int_hop.isValid() && hdr.int_md.isValid()) {
            if (eg_md.int_onset_cells_d == 0) {
                flag_onset();
            } else if (eg_md.int_onset_ns_d == 0) {
                flag_onset();
            }
        }
        if (hdr.int_hop.isValid() && hdr.int_md.isValid()) {
            if (eg_md.int_clear_cells_d != 0) {
                flag_over_clear();
            } else if (eg_md.int_clear_ns_d != 0) {
                flag_over_clear();
            }
        }
    }
}
