/* p4relay — congestion reroute in the data plane (WITH_REROUTE).
 *
 * Per watched destination (reroute_watch, LPM on the destination the packet
 * is routed on, i.e. after the relay rewrite; reroute_watch6 the same for
 * IPv6 destinations, WITH_IPV6) the control plane installs a
 * slot, a flow class and either a backup next hop (reroute_backup) or none
 * (reroute_notify: notices go on upstream from here), and the primary next
 * hop's port, the only port an upstream notice for it is taken from.
 *
 * Detection (RerouteDetect, in Egress, after the queue): a watched packet
 * leaving by its primary next hop is "hot" when
 *  - its delay from ingress MAC to egress exceeds the class's t_q
 *    (pipe.Egress.reroute_class): the egress global timestamp minus the
 *    ingress MAC timestamp bridged with it, both 48-bit ns counters, taken
 *    in 65,536 ns ticks (their bits 47..16, the 32-bit container the ms and
 *    RTP clocks slice too) and compared with t_q in whole ticks: no
 *    saturation, where deq_timedelta (18 bits on Tofino 1) stops at 262 us;
 *    or
 *  - (WITH_INT) it leaves the INT domain here (the sink) and a hop of its
 *    INT stack was at or over its onset threshold (ds_flags onset bit, set by
 *    the hops' int_hop thresholds): congestion anywhere on the path. The
 *    stack's bits say which hop (its place from the source): the egress
 *    parser reads that hop's switch id and egress port, and the notice
 *    carries them (hop_switch_id, hop_port) to the switch that moves the
 *    flow, whose digest names the congested hop.
 * reroute_run counts consecutive hot packets of the slot and any clear
 * packet resets it. The m-th hot packet in a row sends one notice: an E2E
 * mirror copy through session REROUTE_NOTICE_SESSION_BASE + (the flow's
 * ingress pipe) to that pipe's recirculation port; the copy's egress pass
 * turns it into a congestion notice frame (reroute_notice_h + the packet's
 * IPv4 or IPv6 header), which re-enters Ingress (the mirror header becomes the
 * notice header as it is: same layout, and its pkt_type is the kind
 * REROUTE_NOTICE_LOCAL; from_int tells the two triggers apart). Every
 * departure over t_q also stamps reroute_port_hot[egress port] with the
 * time: the control plane returns a flow to its primary only after that
 * port's stamp stayed unchanged for the class's hold time.
 *
 * Reaction (Reroute, in Ingress beside ipv4_lpm, before nexthop), no
 * control plane in the loop:
 *  - a data packet of a slot whose reroute_active is 1 takes the backup next
 *    hop (and is not counted by detection there); a data packet of a slot
 *    without a backup records its ingress port in reroute_from[slot];
 *  - a LOCAL notice (only from a recirculation port) of this switch's own
 *    delay, for a slot with a backup, sets reroute_active to 1: the flow's
 *    next packet takes the backup. Without a backup, or seen in INT (the
 *    congested hop is upstream of here: a move here would not avoid it), it
 *    becomes an UPSTREAM notice sent out of the port the flow came in on;
 *  - an UPSTREAM notice (only from the primary next hop's port of the
 *    receiver's own watch entry) sets reroute_active of the receiver's slot
 *    when it has a backup; without one it goes on upstream by
 *    reroute_from[slot], its IPv4 TTL one less (a notice with TTL <= 1
 *    ends; an IPv6 notice's hop limit is Forwarding's, as any packet's):
 *    hop by hop to the nearest switch with a backup.
 * Each move (0 -> 1) and each notice sent on raises one
 * pipe.IngressDeparser.reroute digest (kind MOVED, NOTIFIED, RELAYED); the
 * control plane records it and, after the hold time, writes reroute_active
 * back to 0. Notices never reach the relay tables, learning or nexthop; they
 * are dropped after use.
 */
/* A notice may still go on: an IPv4 one with TTL > 1 (notice_relay takes
 * one off); an IPv6 one always (Ingress dropped hop limit <= 1 and
 * Forwarding takes one off, as for any IPv6 packet). */
#ifdef WITH_IPV6
#define NOTICE_TTL_OK (hdr.ipv6.isValid() || hdr.ipv4.ttl > 1)
#else
#define NOTICE_TTL_OK (hdr.ipv4.ttl > 1)
#endif

control Reroute(
        inout ingress_headers_t hdr,
        inout ingress_metadata_t ig_md,
        in ingress_intrinsic_metadata_t ig_intr_md,
        inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
        inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {

    /* 0: the slot's flow takes its primary next hop; 1: its backup. */
    @name(".Ingress.reroute_active")
    Register<bit<8>, bit<REROUTE_SLOT_BITS>>(REROUTE_SLOTS, 0) reroute_active;

    RegisterAction<bit<8>, bit<REROUTE_SLOT_BITS>, bit<8>>(reroute_active) read_active = {
        void apply(inout bit<8> active, out bit<8> rv) {
            rv = active;
        }
    };
    /* Returns the old value: a digest only on the move itself. */
    RegisterAction<bit<8>, bit<REROUTE_SLOT_BITS>, bit<8>>(reroute_active) move_to_backup = {
        void apply(inout bit<8> active, out bit<8> rv) {
            rv = active;
            active = 1;
        }
    };

    /* the dev port the slot's flow last came in by (slots without a backup):
     * where an upstream notice for it goes on */
    @name(".Ingress.reroute_from")
    Register<bit<16>, bit<REROUTE_SLOT_BITS>>(REROUTE_SLOTS, 0) reroute_from;

    RegisterAction<bit<16>, bit<REROUTE_SLOT_BITS>, bit<16>>(reroute_from) remember_from = {
        void apply(inout bit<16> port) {
            port = (bit<16>)ig_md.ingress_port;
        }
    };
    RegisterAction<bit<16>, bit<REROUTE_SLOT_BITS>, PortId_t>(reroute_from) read_from = {
        void apply(inout bit<16> port, out PortId_t rv) {
            rv = port[8:0];
        }
    };

    @name(".Ingress.reroute_backup")
    action reroute_backup(bit<16> slot, bit<8> flow_class, nexthop_id_t backup_nexthop_id,
                          PortId_t primary_port) {
        ig_md.rr_has_backup = true;
        ig_md.rr_slot = slot;
        ig_md.rr_backup = backup_nexthop_id;
        ig_md.rr_primary_port = primary_port;
        hdr.bridged.rr_class = flow_class;
        hdr.bridged.rr_slot = slot;
    }

    @name(".Ingress.reroute_notify")
    action reroute_notify(bit<16> slot, bit<8> flow_class, PortId_t primary_port) {
        ig_md.rr_has_backup = false;
        ig_md.rr_slot = slot;
        ig_md.rr_primary_port = primary_port;
        hdr.bridged.rr_class = flow_class;
        hdr.bridged.rr_slot = slot;
    }

    @name(".Ingress.reroute_watch")
    table reroute_watch {
        key = {
            hdr.ipv4.dst_addr : lpm;
        }
        actions = {
            reroute_backup;
            reroute_notify;
            NoAction;
        }
        default_action = NoAction();
        size = REROUTE_WATCH_TABLE_SIZE;
    }

#ifdef WITH_IPV6
    /* IPv6 destinations: the same actions, slots and classes as
     * reroute_watch (the control plane gives each prefix its own slot) */
    @name(".Ingress.reroute_watch6")
    /* each packet is looked up in one of the two: no chain between them */
    @ignore_table_dependency(".Ingress.reroute_watch")
    table reroute_watch6 {
        key = {
            hdr.ipv6.dst_addr : lpm;
        }
        actions = {
            reroute_backup;
            reroute_notify;
            NoAction;
        }
        default_action = NoAction();
        size = REROUTE_WATCH6_TABLE_SIZE;
    }
#endif

    action notice_digest(bit<8> kind) {
        ig_dprsr_md.digest_type = DIGEST_TYPE_REROUTE;
        ig_md.rr_kind = kind;
    }

    /* No backup here, or seen in INT: the notice goes to the switch the
     * flow came from. */
    action notice_upstream() {
        hdr.reroute_notice.kind = REROUTE_NOTICE_UPSTREAM;
        ig_tm_md.ucast_egress_port = hdr.reroute_notice.port;
        ig_dprsr_md.digest_type = DIGEST_TYPE_REROUTE;
        ig_md.rr_kind = REROUTE_NOTIFIED;
        ig_md.rr_upstream = true;
    }

    /* An upstream notice, no backup here: on to where the flow comes in
     * (the register's output is the egress port: no stage between) */
    action notice_relay() {
#if __TARGET_TOFINO__ == 2
        ig_md.rr_from_port = read_from.execute((bit<REROUTE_SLOT_BITS>)ig_md.rr_slot);
#else
        ig_tm_md.ucast_egress_port = read_from.execute((bit<REROUTE_SLOT_BITS>)ig_md.rr_slot);
#endif
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
        ig_dprsr_md.digest_type = DIGEST_TYPE_REROUTE;
        ig_md.rr_kind = REROUTE_RELAYED;
        ig_md.rr_upstream = true;
    }

#if __TARGET_TOFINO__ == 2
    /* Tofino 2: the register's output written straight into
     * ucast_egress_port leaves the ingress POV bits (its $valid among them)
     * no PHV placement; one stage later through metadata, the same port. */
    action relay_from_port() {
        ig_tm_md.ucast_egress_port = ig_md.rr_from_port;
    }
#endif

    action set_detect() {
        hdr.bridged.rr_detect = 1;
    }

    /* Single-stage items (Tofino 1 has no long branches): the watch, then
     * the registers (one action each, by the packet: a notice's branches
     * exclude each other), then the digest or the detect bit. */
    apply {
        bool watched = false;
        if (hdr.ipv4.isValid()) {
            /* each family's own destination (an IPv6 packet's ipv4 fields
             * are not its own) */
            watched = reroute_watch.apply().hit;
        }
#ifdef WITH_IPV6
        if (hdr.ipv6.isValid()) {
            watched = reroute_watch6.apply().hit;
        }
#endif
        if (hdr.reroute_notice.isValid()) {
            if (watched && ig_md.rr_has_backup
                    && hdr.reroute_notice.kind == REROUTE_NOTICE_LOCAL
                    && ig_intr_md.ingress_port[6:0] == RECIRC_PORT_LOCAL
                    && hdr.reroute_notice.from_int == 0) {
                ig_md.rr_moved_from = move_to_backup.execute(
                    (bit<REROUTE_SLOT_BITS>)ig_md.rr_slot);
            } else if (watched && ig_md.rr_has_backup
                    && hdr.reroute_notice.kind == REROUTE_NOTICE_UPSTREAM
                    && ig_intr_md.ingress_port == ig_md.rr_primary_port) {
                ig_md.rr_moved_from = move_to_backup.execute(
                    (bit<REROUTE_SLOT_BITS>)ig_md.rr_slot);
            } else if (watched && hdr.reroute_notice.kind == REROUTE_NOTICE_LOCAL
                    && ig_intr_md.ingress_port[6:0] == RECIRC_PORT_LOCAL) {
                /* no backup here, or seen in INT */
                notice_upstream();
            } else if (watched && hdr.reroute_notice.kind == REROUTE_NOTICE_UPSTREAM
                    && ig_intr_md.ingress_port == ig_md.rr_primary_port
                    && NOTICE_TTL_OK) {
                /* no backup here (the branch above took the others) */
                notice_relay();
            }
            /* Forwarding drops every notice but one sent on upstream
             * (drop_ctl written there, after ipv4_lpm's own drop): used,
             * unwatched, forged or from the wrong port */
        } else if (watched && ig_md.rr_has_backup) {
            ig_md.rr_active = read_active.execute((bit<REROUTE_SLOT_BITS>)ig_md.rr_slot);
        } else if (watched) {
            remember_from.execute((bit<REROUTE_SLOT_BITS>)ig_md.rr_slot);
        }
#if __TARGET_TOFINO__ == 2
        if (ig_md.rr_kind == REROUTE_RELAYED) {
            relay_from_port();
        }
#endif
        /* rr_moved_from: the register's old value, 1 (parser) without a move */
        if (ig_md.rr_moved_from == 0) {
            notice_digest(REROUTE_MOVED);
        }
        /* a watched data packet on its primary: detection counts it;
         * on the backup (rr_active 1) Forwarding takes rr_backup */
        if (watched && !hdr.reroute_notice.isValid()) {
            if (!ig_md.rr_has_backup) {
                set_detect();
            } else if (ig_md.rr_active == 0) {
                set_detect();
            }
        }
    }
}

/* Egress half: detection, the port stamp and the notice copy; and, on the
 * copy's own pass, the notice frame. */
control RerouteDetect(
        inout egress_headers_t hdr,
        inout egress_metadata_t eg_md,
        in egress_intrinsic_metadata_t eg_intr_md,
        in egress_intrinsic_metadata_from_parser_t eg_prsr_md,
        inout egress_intrinsic_metadata_for_deparser_t eg_dprsr_md) {

    /* consecutive hot departures of the slot's flow by its primary next hop */
    @name(".Egress.reroute_run")
    Register<bit<16>, bit<REROUTE_SLOT_BITS>>(REROUTE_SLOTS, 0) reroute_run;
    /* ms time of the last departure over t_q, per egress dev_port */
    @name(".Egress.reroute_port_hot")
    Register<bit<32>, bit<9>>(REROUTE_PORTS, 0) reroute_port_hot;

    RegisterAction<bit<16>, bit<REROUTE_SLOT_BITS>, bit<16>>(reroute_run) run_hot = {
        void apply(inout bit<16> run, out bit<16> rv) {
            run = run |+| 1;
            rv = run;
        }
    };
    RegisterAction<bit<16>, bit<REROUTE_SLOT_BITS>, bit<16>>(reroute_run) run_clear = {
        void apply(inout bit<16> run) {
            run = 0;
        }
    };
    RegisterAction<bit<32>, bit<9>, bit<32>>(reroute_port_hot) stamp_port = {
        void apply(inout bit<32> hot_ms) {
            hot_ms = eg_md.now_ms;
        }
    };

    EARLY_STEP(reroute_port_hot_step, stamp_port.execute(eg_intr_md.egress_port))

    /* Knobs per flow class: t_q (ns of ingress-to-egress delay) and m
     * (packets). The hold before a flow moves back is the control plane's
     * (its configuration): nothing here reads it. */
    @name(".Egress.reroute_thresholds")
    action reroute_thresholds(bit<32> t_q_ns, bit<16> m) {
        eg_md.rr_hit = 1;
        /* the egress time in ticks: bits 47..16 of the 48-bit timestamp,
         * the container MsClock and RtpClock slice too */
        eg_md.rr_delay = eg_prsr_md.global_tstamp[47:16];
        eg_md.rr_t_q = (bit<32>)t_q_ns[31:16];
        eg_md.rr_m = m;
    }

    @name(".Egress.reroute_class")
    table reroute_class {
        key = {
            hdr.bridged.rr_class : exact;
        }
        actions = {
            reroute_thresholds;
            NoAction;
        }
        default_action = NoAction();
        size = REROUTE_CLASSES;
    }

    /* both 48-bit ns counters of the same clock; their bits 47..16 apart
     * (mod 2^32) are the delay in 65,536 ns ticks */
    action delay() {
        eg_md.rr_delay = eg_md.rr_delay - hdr.bridged.rr_ingress_ts;
    }

    action over() {
        eg_md.rr_over = eg_md.rr_delay |-| eg_md.rr_t_q;
    }

    action delay_ns() {
        eg_md.rr_delay_ns = eg_md.rr_delay << 16;
    }

#ifdef WITH_INT
    action int_onset() {
        hdr.bridged.rr_int = 1;
    }

    /* the hop the stack marks at/over onset (the egress parser read it):
     * the notice names it */
    action name_hop() {
        eg_md.rr_hop_switch = eg_md.rr_hop.switch_id;
        eg_md.rr_hop_port = eg_md.rr_hop.egress_port;
    }
#endif

    action left() {
        eg_md.rr_left = eg_md.rr_m - eg_md.rr_run;
    }

    /* The notice copy, through the session of the flow's ingress pipe (a
     * constant per branch: an add of the port's pipe bits would tie
     * rr_session to its PHV container). The mirror header is emitted from
     * the fields where they are (EgressDeparser). Egress gives the notice
     * the packet's one mirror (mirror_type): RtpQuality and Ired leave it. */
    action notice(MirrorId_t s) {
        eg_md.rr_session = s;
        eg_md.rr_notice = 1;
        eg_dprsr_md.mirror_type = MIRROR_TYPE_REROUTE_NOTICE;
    }

    /* The copy's pass: the parser extracted its mirror header as the
     * notice (same layout; pkt_type is the kind LOCAL); the notice goes in
     * front of the packet's IPv4 header. */
    action make_notice() {
        hdr.ethernet.ether_type = ETHERTYPE_REROUTE_NOTICE;
        hdr.vlan_tag.setInvalid();
    }

    /* Every step its own single-stage item, gated by rr_hit (the class's
     * entry) and the bridged bits: Tofino 1 has no long branches, and a
     * gated block over several stages would keep RtpQuality, INT and iRED
     * out of them. Chain: reroute_class (with the egress time) -> delay ->
     * over -> reroute_run -> left -> notice. */
    apply {
        if (hdr.reroute_notice.isValid()) {
            make_notice();
        } else if (hdr.bridged.isValid()) {
            reroute_class.apply();
        }
        delay();
#ifdef WITH_INT
        /* the sink: the stack's onset bit, ORed in by every hop */
        if (hdr.int_bridged.isValid() && hdr.int_bridged.sink == 1 && hdr.int_md.isValid()) {
            if (hdr.int_md.ds_flags & INT_FLAG_ONSET != 0) {
                int_onset();
            }
        }
        /* extracted only at the sink, for a stack with a hop's onset bit */
        if (eg_md.rr_hop.isValid()) {
            name_hop();
        }
#endif
        over();
        delay_ns();
        if (eg_md.rr_hit == 1 && eg_md.rr_over != 0) {
            reroute_port_hot_step.apply();
        }
        if (eg_md.rr_hit == 1 && hdr.bridged.rr_detect == 1) {
            if (eg_md.rr_over != 0 || hdr.bridged.rr_int == 1) {
                eg_md.rr_run = run_hot.execute((bit<REROUTE_SLOT_BITS>)hdr.bridged.rr_slot);
            } else {
                run_clear.execute((bit<REROUTE_SLOT_BITS>)hdr.bridged.rr_slot);
            }
        }
        left();
        /* rr_run is 0 unless run_hot counted this packet */
        if (eg_md.rr_run != 0 && eg_md.rr_left == 0) {
            if (hdr.bridged.rr_ingress_port[8:7] == 0) {
                notice(REROUTE_NOTICE_SESSION_BASE + 0);
            } else if (hdr.bridged.rr_ingress_port[8:7] == 1) {
                notice(REROUTE_NOTICE_SESSION_BASE + 1);
            } else if (hdr.bridged.rr_ingress_port[8:7] == 2) {
                notice(REROUTE_NOTICE_SESSION_BASE + 2);
            } else {
                notice(REROUTE_NOTICE_SESSION_BASE + 3);
            }
        }
    }
}
