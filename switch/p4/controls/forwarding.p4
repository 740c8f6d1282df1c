/* p4relay — IPv4 forwarding: longest-prefix match to a next hop, which sets
 * the egress port and rewrites both MACs; TTL is decremented here (the
 * caller has already dropped TTL <= 1). The default route is an ipv4_lpm
 * entry 0.0.0.0/0 (switch/bfrt/bootstrap.py installs it). With WITH_REROUTE,
 * Reroute (reroute.p4) runs beside ipv4_lpm: a watched flow on its backup
 * then gets the backup's nexthop_id, and congestion notices end there. */
control Forwarding(
        inout ingress_headers_t hdr,
        inout ingress_metadata_t ig_md,
        in ingress_intrinsic_metadata_t ig_intr_md,
        inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
        inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {

    @name(".Ingress.drop")
    action drop() {
        ig_dprsr_md.drop_ctl = 1;
    }

    @name(".Ingress.set_nexthop")
    action set_nexthop(nexthop_id_t nexthop_id) {
        ig_md.nexthop_id = nexthop_id;
    }

    @name(".Ingress.ipv4_lpm")
    table ipv4_lpm {
        key = {
            hdr.ipv4.dst_addr : lpm;
        }
        actions = {
            set_nexthop;
            drop;
        }
        default_action = drop();
        size = IPV4_LPM_TABLE_SIZE;
    }

    @name(".Ingress.forward")
    action forward(PortId_t port, mac_addr_t src_mac, mac_addr_t dst_mac) {
        ig_tm_md.ucast_egress_port = port;
        ig_md.forwarded = true;
        hdr.ethernet.src_addr = src_mac;
        hdr.ethernet.dst_addr = dst_mac;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }

    @name(".Ingress.nexthop")
    table nexthop {
        key = {
            ig_md.nexthop_id : exact;
        }
        actions = {
            forward;
            drop;
        }
        default_action = drop();
        size = NEXTHOP_TABLE_SIZE;
    }

#ifdef WITH_REROUTE
    Reroute() reroute;
#endif

#ifdef WITH_REROUTE
    action use_backup() {
        ig_md.nexthop_id = ig_md.rr_backup;
    }
#endif

    apply {
#ifdef WITH_REROUTE
        /* Reroute's reroute_watch is keyed on the same destination as
         * ipv4_lpm and independent of it: applied after it in program order
         * (before it, the compiler chains them) so the two sit side by side.
         * Single-stage items gated by `routed` (Tofino 1 has no long
         * branches). */
        bool routed = ipv4_lpm.apply().hit;
        reroute.apply(hdr, ig_md, ig_intr_md, ig_dprsr_md, ig_tm_md);
        if (routed && ig_md.rr_active != 0) {
            /* the flow's backup next hop */
            use_backup();
        }
        /* one stage: the notice's drop and nexthop (whose drop action
         * writes drop_ctl too) exclude each other */
        if (routed) {
            if (hdr.reroute_notice.isValid()) {
                if (!ig_md.rr_upstream) {
                    drop();
                }
            } else {
                nexthop.apply();
            }
        }
#else
        if (ipv4_lpm.apply().hit) {
            nexthop.apply();
        }
#endif
    }
}
