/* p4relay — relay sessions over IPv6 (the RTPProxy offload of IPv6 calls).
 *
 * The same steps as RelaySessions (relay_sessions.p4), with the relay's own
 * address as a small id: the relay has a handful of IPv6 addresses, so
 * relay6_addr maps the destination (128 bits) and port range to an 8-bit
 * relay_id, and relay6 / relay_guard6 key on that id. The remote party's
 * address is the only 128-bit part of a key: a relay6 entry is 177 bits of
 * key instead of 297, a relay_guard6 entry 24 instead of 144
 * (docs/design/ipv6.md has the compiler's figures).
 *
 * relay6_addr: destination address (exact) and UDP port range -> relay_id.
 *   Only UDP with a checksum: zero is invalid over IPv6 (RFC 8200 8.1), so a
 *   zero-checksum datagram is never relayed, guarded or learned; it is routed
 *   unchanged to the relay address, whose host discards it.
 * relay6: remote address, relay_id, both ports, bound port -> relay6_leg(leg,
 *   rtcp), relay_leg's twin (an action has one control-plane name and one
 *   control); idle timeout per entry.
 * relay_guard6: relay_id and relay port -> guard6_drop(leg), as relay_guard's
 *   guard_drop.
 * leg_rewrite6: leg -> rewrite6 (two IPv6 addresses, two ports; RTCP adds 1
 *   to both ports); its direct counter is the direction's packets and bytes.
 *   Legs are one index space with IPv4's: the quality registers and
 *   guard_drops are indexed by the same leg, a leg is in leg_rewrite or in
 *   leg_rewrite6.
 * The UDP checksum of a relayed packet is always updated (the deparser,
 *   from the parser's residual); a result of 0 goes out as 0xffff.
 */
#ifdef WITH_INT6
/* INT packets are routed, never relayed (as RELAY_LOOKUP's RELAY_NO_INT) */
#define RELAY_LOOKUP6 (hdr.ipv6.isValid() && hdr.udp.isValid() && hdr.udp.checksum != 0 \
                       && !hdr.int_shim.isValid())
#else
#define RELAY_LOOKUP6 (hdr.ipv6.isValid() && hdr.udp.isValid() && hdr.udp.checksum != 0)
#endif
control RelaySessions6(
        inout ingress_headers_t hdr,
        inout ingress_metadata_t ig_md) {

    DirectCounter<bit<64>>(CounterType_t.PACKETS_AND_BYTES) leg6_counter;

    @name(".Ingress.mark_relay6")
    action mark_relay6(bit<8> relay_id) {
        ig_md.relay6_dst = true;
        ig_md.relay_id = relay_id;
    }

    /* The IPv4 steps write the UDP ports and the bridged header too, but
     * never for an IPv6 packet: the compiler is told to ignore those
     * dependencies (docs/design/ipv6.md "Staying inside 12 stages"). */
    @name(".Ingress.relay6_addr")
    @ignore_table_dependency(".Ingress.leg_rewrite")
    STAGE_T1_IPV6(1)
    table relay6_addr {
        key = {
            hdr.ipv6.dst_addr : exact;
            hdr.udp.dst_port  : range;
        }
        actions = {
            mark_relay6;
            NoAction;
        }
        default_action = NoAction();
        size = RELAY6_ADDR_TABLE_SIZE;
    }

    @name(".Ingress.relay6_leg")
    action relay6_leg(leg_t leg, bit<1> rtcp) {
        ig_md.relay6_hit = true;
        ig_md.leg6 = leg;
        ig_md.rtcp6_port_offset = (bit<16>)rtcp;
        /* what Egress (RtpQuality) needs, as relay_leg writes it (from the
         * action data: one source per container) */
        hdr.bridged.relay = 1;
        hdr.bridged.rtcp = rtcp;
        hdr.bridged._pad = 0;
        hdr.bridged.leg = leg;
    }

    @name(".Ingress.relay6")
    @ignore_table_dependency(".Ingress.leg_rewrite")
    IGNORE_T1_IPV6(".Ingress.relay")
    STAGE_T1_IPV6(2)
    table relay6 {
        key = {
            hdr.ipv6.src_addr : exact;
            ig_md.relay_id    : exact;
            hdr.udp.src_port  : exact;
            hdr.udp.dst_port  : exact;
            ig_md.bound_port  : exact;
        }
        actions = {
            relay6_leg;
            @defaultonly NoAction;
        }
        default_action = NoAction();
        size = RELAY6_TABLE_SIZE;
        idle_timeout = true;
    }

    @name(".Ingress.rewrite6")
    action rewrite6(ipv6_addr_t src_addr, ipv6_addr_t dst_addr,
                    l4_port_t src_port, l4_port_t dst_port) {
        hdr.ipv6.src_addr = src_addr;
        hdr.ipv6.dst_addr = dst_addr;
        hdr.udp.src_port = src_port + ig_md.rtcp6_port_offset;
        hdr.udp.dst_port = dst_port + ig_md.rtcp6_port_offset;
        ig_md.udp_csum_update = true;
        leg6_counter.count();
    }

    @name(".Ingress.leg_rewrite6")
    @ignore_table_dependency(".Ingress.leg_rewrite")
    IGNORE_T1_IPV6("tbl_relay_sessions_keep_zero_checksum")
    STAGE_T1_IPV6(3)
    table leg_rewrite6 {
        key = {
            ig_md.leg6 : exact;
        }
        actions = {
            rewrite6;
            @defaultonly NoAction;
        }
        default_action = NoAction();
        size = LEG6_TABLE_SIZE;
        counters = leg6_counter;
    }

    @name(".Ingress.guard6_drop")
    action guard6_drop(leg_t leg) {
        ig_md.guard6_hit = true;
        ig_md.guard_leg = leg;   /* GuardCount's index, either family */
    }

    @name(".Ingress.relay_guard6")
    @ignore_table_dependency(".Ingress.leg_rewrite")
    IGNORE_T1_IPV6(".Ingress.relay_guard")
    STAGE_T1_IPV6(2)
    table relay_guard6 {
        key = {
            ig_md.relay_id   : exact;
            hdr.udp.dst_port : exact;
        }
        actions = {
            guard6_drop;
            @defaultonly NoAction;
        }
        default_action = NoAction();
        size = RELAY_GUARD6_TABLE_SIZE;
    }

    /* Single-stage items, as RelaySessions: relay6 and relay_guard6 side by
     * side after relay6_addr (their key holds its relay_id), leg_rewrite6
     * after relay6. */
    apply {
        if (RELAY_LOOKUP6) {
            relay6_addr.apply();
        }
        if (ig_md.relay6_dst) {
            relay6.apply();
        }
        if (ig_md.relay6_dst) {
            relay_guard6.apply();
        }
        /* no leg_rewrite6 entry: the packet goes on to the relay address */
        if (ig_md.relay6_hit) {
            leg_rewrite6.apply();
        }
    }
}
