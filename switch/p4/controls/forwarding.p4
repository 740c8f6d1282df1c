/* p4relay — IP forwarding: longest-prefix match (ipv4_lpm, ipv6_lpm) to a
 * next hop, which sets the egress port and rewrites both MACs; TTL / hop
 * limit is decremented here, per family (the caller has already dropped
 * TTL / hop limit <= 1). The default routes are entries 0.0.0.0/0 and ::/0
 * (switch/bfrt/bootstrap.py installs the IPv4 one). With WITH_REROUTE,
 * Reroute (reroute.p4) runs beside ipv4_lpm: a watched flow on its backup
 * then gets the backup's nexthop_id, and congestion notices end there.
 * ipv6_lpm and ipv4_lpm write the same fields (nexthop_id, drop_ctl) for
 * packets of different families: ipv4_lpm tells the compiler to ignore that
 * dependency, so neither waits for the other's stages. */
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
#ifdef WITH_IPV6
    /* ipv6_lpm (before it in program order) writes nexthop_id and drop_ctl
     * for IPv6 packets only */
    @ignore_table_dependency(".Ingress.ipv6_lpm")
#endif
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
    }

    /* Per family, gated by the header's validity: an IPv4 write in forward
     * would land in containers an IPv6 packet's fields may share. */
    action ttl_dec() {
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }

    action hop_limit_dec() {
        hdr.ipv6.hop_limit = hdr.ipv6.hop_limit - 1;
    }

#ifdef WITH_IPV6
    @name(".Ingress.ipv6_lpm")
    STAGE_T1_IPV6(5)
    table ipv6_lpm {
        key = {
            hdr.ipv6.dst_addr : lpm;
        }
        actions = {
            set_nexthop;
            drop;
        }
        default_action = drop();
        size = IPV6_LPM_TABLE_SIZE;
    }
#endif

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

    /* Single-stage items gated by bits computed once (Tofino 1 has no long
     * branches: an if/else around both families' lookups would wait for the
     * later one's inputs). */
    apply {
        /* an IPv6 notice's too (Reroute's notice_relay takes an IPv4 one's) */
        if (hdr.ipv6.isValid()) {
            hop_limit_dec();
        }
#ifdef WITH_REROUTE
        if (hdr.ipv4.isValid() && !hdr.reroute_notice.isValid()) {
            ttl_dec();   /* a notice's TTL is Reroute's */
        }
#else
        if (hdr.ipv4.isValid()) {
            ttl_dec();
        }
#endif
        bool routed6 = false;
#ifdef WITH_IPV6
        if (hdr.ipv6.isValid()) {
            routed6 = ipv6_lpm.apply().hit;
        }
#endif
        bool routed = false;
        if (hdr.ipv4.isValid()) {
            routed = ipv4_lpm.apply().hit;
        }
#ifdef WITH_REROUTE
        /* Reroute's reroute_watch is keyed on the same destination as
         * ipv4_lpm and independent of it: applied after it in program order
         * (before it, the compiler chains them) so the two sit side by side.
         * Ungated (a gated block over Reroute's stages would keep the
         * steps after it out of them): reroute_watch looks up IPv4
         * packets only, reroute_watch6 IPv6 ones. */
        reroute.apply(hdr, ig_md, ig_intr_md, ig_dprsr_md, ig_tm_md);
        if ((routed || routed6) && ig_md.rr_active != 0) {
            /* the flow's backup next hop */
            use_backup();
        }
#endif
        /* an IPv6 guard hit (RelaySessions6): dropped after both lookups'
         * own drops (the IPv4 one is dropped in Ingress, ahead of them) */
        if (GUARD6_DROP) {
            drop();
        }
#ifdef WITH_REROUTE
        /* one stage: the notice's drop and nexthop (whose drop action
         * writes drop_ctl too) exclude each other */
        if (routed || routed6) {
            if (hdr.reroute_notice.isValid()) {
                if (!ig_md.rr_upstream) {
                    drop();
                }
            } else {
                nexthop.apply();
            }
        }
#else
        if (routed || routed6) {
            nexthop.apply();
        }
#endif
    }
}
