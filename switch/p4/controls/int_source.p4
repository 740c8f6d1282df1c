/* p4relay — INT in Ingress: the checks on INT a packet brings, the watch
 * list, the roles of the egress port, and the sink's report copy.
 *
 * IntCheck: a packet marked with INT_DSCP must carry a well-formed INT-MD
 *   stack (the parser checks type, version, hop size, instructions, that
 *   shim length and remaining hop count agree, i.e. 1..INT_MAX_HOPS hops,
 *   and that UDP is long enough for shim and MD header; the egress length
 *   check drops a datagram claiming more than the frame has). Ingress drops
 *   anything else; IntCheck counts it in int_malformed.
 * IntSource (after Forwarding chose the egress port):
 *   int_role (next hop -> role; keyed by the next hop Forwarding chose, so
 *     it is looked up beside nexthop, not after it): int_transit = the next
 *     hop is another INT switch (Egress adds this switch's hop, or inserts
 *     INT when this is the source); int_sink = the next hop is outside the
 *     INT domain (Egress strips INT; the report copy is made here). No
 *     entry: outside the domain, packets pass untouched.
 *   int_watch (ternary, by priority): which packets without INT get it
 *     inserted when they leave by a transit port. Keys: the relay bit and leg
 *     of an offloaded session (hdr.bridged, so one entry traces every
 *     offloaded call, or one leg), the addresses after the relay rewrite and
 *     the destination port (prefixes and flows).
 *   Sink: an INT packet leaving by a sink port is mirrored (I2E, session
 *     INT_REPORT_SESSION, mirror header int_report_mirror_h with its flow's
 *     suppression slot and its ports here); the copy's egress pass (IntSink)
 *     decides whether it becomes a telemetry report.
 * INT packets are routed, never relayed (Ingress): the relay switch is the
 * INT source of its sessions' media.
 */
control IntCheck() {

    @name(".Ingress.int_malformed")
    Register<bit<32>, bit<1>>(1, 0) int_malformed;
    RegisterAction<bit<32>, bit<1>, bit<32>>(int_malformed) count_malformed = {
        void apply(inout bit<32> n) {
            n = n + 1;
        }
    };

    apply {
        count_malformed.execute(0);
    }
}

/* The watch list, applied right after RelaySessions (its keys are the
 * relay result and the rewritten addresses). */
control IntWatch(
        inout ingress_headers_t hdr,
        inout ingress_metadata_t ig_md) {

    /* source: Egress inserts INT when the packet leaves by a transit port
     * (int_role); int_watch sees only packets without INT */
    @name(".Ingress.int_watch_flow")
    action int_watch_flow() {
        hdr.int_bridged.source = 1;
    }

    @name(".Ingress.int_watch")
    table int_watch {
        key = {
            hdr.bridged.relay : ternary;
            hdr.bridged.leg : ternary;
            hdr.ipv4.src_addr : ternary;
            hdr.ipv4.dst_addr : ternary;
            hdr.udp.dst_port : ternary;
        }
        actions = {
            int_watch_flow;
            NoAction;
        }
        default_action = NoAction();
        size = INT_WATCH_TABLE_SIZE;
    }

#ifdef WITH_INT6
    /* IPv6 destinations traced (after the relay rewrite): the same action;
     * a list of media prefixes */
    @name(".Ingress.int_watch6")
    /* each packet is looked up in one of the two: no chain between them */
    @ignore_table_dependency(".Ingress.int_watch")
    table int_watch6 {
        key = {
            hdr.ipv6.dst_addr : lpm;
        }
        actions = {
            int_watch_flow;
            NoAction;
        }
        default_action = NoAction();
        size = INT_WATCH6_TABLE_SIZE;
    }
#endif

    apply {
#ifdef WITH_INT6
        if (hdr.udp.isValid() && !hdr.int_shim.isValid()) {
            /* each family's own addresses (an IPv6 packet's ipv4 fields
             * are not its own) */
            if (hdr.ipv4.isValid()) {
                int_watch.apply();
            }
            if (hdr.ipv6.isValid()) {
                int_watch6.apply();
            }
        }
#else
        /* Ingress applies it to IPv4 packets only */
        if (hdr.udp.isValid() && !hdr.int_shim.isValid()) {
            int_watch.apply();
        }
#endif
    }
}

control IntSource(
        inout ingress_headers_t hdr,
        inout ingress_metadata_t ig_md,
        inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
        in ingress_intrinsic_metadata_for_tm_t ig_tm_md) {

    /* CRC-16/UMTS (poly 0x8005, no reflection, init 0) of src, dst, sport,
     * dport, big-endian: the same slot on the software switch. */
    CRCPolynomial<bit<16>>(16w0x8005, false, false, false, 16w0, 16w0) slot_poly;
    Hash<bit<16>>(HashAlgorithm_t.CUSTOM, slot_poly) slot_hash;
#ifdef WITH_INT6
    Hash<bit<16>>(HashAlgorithm_t.CUSTOM, slot_poly) slot_hash6;
#endif

    @name(".Ingress.int_transit")
    action int_transit() {
        hdr.int_bridged.transit = 1;
    }

    @name(".Ingress.int_sink")
    action int_sink() {
        hdr.int_bridged.sink = 1;
        /* Forwarding chose the port in nexthop's stage, before int_role's */
        hdr.int_bridged.sink_port = ig_tm_md.ucast_egress_port;
    }

    @name(".Ingress.int_role")
    table int_role {
        key = {
            ig_md.nexthop_id : exact;
        }
        actions = {
            int_transit;
            int_sink;
            NoAction;
        }
        default_action = NoAction();
        size = INT_PORT_TABLE_SIZE;
    }

    action frame_len_ethernet() {
        ig_md.int_mirror.frame_len = hdr.ipv4.total_len + 14;
    }

    action frame_len_vlan() {
        ig_md.int_mirror.frame_len = hdr.ipv4.total_len + 18;
    }

#ifdef WITH_INT6
    /* IPv6: the UDP length (UDP right after the 40-byte header: what
     * payload_len counts, and already in Ingress's PHV) */
    action frame_len_ethernet6() {
        ig_md.int_mirror.frame_len = hdr.udp.hdr_length + 54;
    }

    action frame_len_vlan6() {
        ig_md.int_mirror.frame_len = hdr.udp.hdr_length + 58;
    }
#endif

    action report_copy() {
        ig_dprsr_md.mirror_type = MIRROR_TYPE_INT_REPORT;
        ig_md.int_mirror_session = INT_REPORT_SESSION;
        ig_md.int_mirror.setValid();
        ig_md.int_mirror.pkt_type = PKT_TYPE_INT_REPORT;
        ig_md.int_mirror.ds_flags = hdr.int_md.ds_flags;
        ig_md.int_mirror._pad = 0;
        ig_md.int_mirror._pad2 = 0;
        ig_md.int_mirror._pad3 = 0;
        /* the sink's hop in the report: its ports (Forwarding chose the
         * egress port in nexthop's stage, before int_role's) */
        ig_md.int_mirror.ingress_port = ig_md.ingress_port;
        ig_md.int_mirror.egress_port = ig_tm_md.ucast_egress_port;
        /* tells the egress parser to skip the stack (the shim is stripped
         * there; a match register cannot hold int_bridged.sink that long) */
        hdr.int_shim.rsvd = 1;
    }

    action hop_ingress_port() {
        hdr.int_bridged.ingress_port[8:0] = ig_md.ingress_port;
    }

    apply {
        hop_ingress_port();
#ifdef WITH_INT6
        if (hdr.ipv6.isValid()) {
            /* the same CRC over the IPv6 addresses */
            ig_md.int_mirror.flow_slot = slot_hash6.get({
                hdr.ipv6.src_addr,
                hdr.ipv6.dst_addr,
                hdr.udp.src_port,
                hdr.udp.dst_port
            }) & (INT_FLOW_SLOTS - 1);
            if (hdr.vlan_tag.isValid()) {
                frame_len_vlan6();
            } else {
                frame_len_ethernet6();
            }
        } else {
#endif
        ig_md.int_mirror.flow_slot = slot_hash.get({
            hdr.ipv4.src_addr,
            hdr.ipv4.dst_addr,
            hdr.udp.src_port,
            hdr.udp.dst_port
        }) & (INT_FLOW_SLOTS - 1);
        if (hdr.vlan_tag.isValid()) {
            frame_len_vlan();
        } else {
            frame_len_ethernet();
        }
#ifdef WITH_INT6
        }
#endif
        /* the roles and what follows from them in int_role's own stage
         * (next-table branches, no data dependence): Ingress ends with
         * nexthop's stage */
        if (hdr.udp.isValid()) {
            switch (int_role.apply().action_run) {
                int_sink: {
                    if (hdr.int_shim.isValid()) {
                        report_copy();
                    }
                }
            }
        }
    }
}
