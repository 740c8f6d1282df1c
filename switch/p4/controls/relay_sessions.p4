/* p4relay — relay sessions (the RTPProxy offload).
 *
 * relay_addr: which destination address:port-range is a relay (RTPProxy)
 *   address. A hit there that misses `relay` is forwarded unchanged (to the
 *   relay server) and may raise the learning digest (LearnFilter).
 relay: exact UDP 4-tuple and bound port -> (leg, rtcp). The port binds
 *   a leg to where its party's packets arrive: a packet spoofing the party's
 *   address and port from another port misses, so it is neither relayed to
 *   the other party nor (with the guard) handed to the relay server. On a
 *   port whose binding is off the bound port is UNBOUND_PORT (the parser's
 *   port binding), so entries installed with it match from any such port. One
 *   entry carries only 22 bits of action data (the 105-bit key leaves them no
 *   room in its match word: the compiler refuses @force_immediate, so they sit
 *   in an action data RAM beside it); idle timeout (notify mode, set via the
 *   IdleTimeout attribute) per entry, no counter.
 * leg_rewrite: leg -> the rewrite (two addresses, two ports), once per session
 *   direction; RTCP entries add 1 to both ports (RTPProxy allocates RTCP on
 *   RTP + 1 on both sides). Its direct counter is the direction's packets and
 *   bytes, RTP and RTCP.
 * relay_guard: relay address:port of an offloaded call -> drop, counted in
 *   guard_drops[leg] (the leg of the direction whose relay port it is). Looked
 *   up beside relay; its hit counts only when relay_addr marked the packet and
 *   relay missed, i.e. for a packet from
 *   a source that is not the call's party (another address or port, or the
 *   party's address arriving on another switch port): RTPProxy must not see it, or it
 *   would latch its (idle, unlatched) stream to that source and relay the
 *   sender's media to the callee. The learn digest is still raised (Ingress),
 *   so the agent sees the foreign source. 4 entries per call (each leg's RTP
 *   and RTCP port), needed in every pipe whose ports can receive foreign
 *   traffic; a guard miss is the old behaviour (forward to the relay server).
 * Both session tables are meant for per-pipe entry scope: the client installs
 *   a direction's entries in the pipe of the port its packets arrive on.
 */
/* The packets the relay tables look up: UDP, no congestion notice (reroute),
 * no INT on board (INT packets are routed: the relay switch is the INT
 * source of its sessions). Header bits only: a gateway at stage 0. */
#ifdef WITH_REROUTE
#define RELAY_NO_NOTICE !hdr.reroute_notice.isValid()
#else
#define RELAY_NO_NOTICE true
#endif
#ifdef WITH_INT
#define RELAY_NO_INT !hdr.int_shim.isValid()
#else
#define RELAY_NO_INT true
#endif
#define RELAY_LOOKUP (hdr.ipv4.isValid() && hdr.udp.isValid() && RELAY_NO_NOTICE && RELAY_NO_INT)
/* A guard hit drops a packet that relay_addr marked and relay missed: bits of
 * relay's own stages, so Ingress drops it in the step right after them, ahead
 * of Forwarding (whose drop actions write drop_ctl after it in program order:
 * a drop waiting for guard_count's counter RAM would hold ipv4_lpm back). */
#define GUARD_DROP (ig_md.guard_hit && ig_md.relay_dst && !ig_md.relay_hit)
/* the same for IPv6 (RelaySessions6's own fields) */
#define GUARD6_DROP (ig_md.guard6_hit && ig_md.relay6_dst && !ig_md.relay6_hit)

control RelaySessions(
        inout ingress_headers_t hdr,
        inout ingress_metadata_t ig_md) {

    /* Counting is per leg (contract v5): per-entry counters on relay and
     * relay_guard took as much SRAM as the tables. leg_rewrite's direct
     * counter counts a direction's RTP and RTCP (an indexed counter in its
     * action does not fit leg_rewrite's stages); guard drops are counted
     * packets only, by the leg the guard_drop entry names (a 64-bit
     * bytes + packets cell per leg fits no stage beside relay_guard). */
    DirectCounter<bit<LEG_COUNTER_WIDTH>>(CounterType_t.PACKETS_AND_BYTES) leg_counter;  /* sizes.p4 */

    @name(".Ingress.mark_relay")
    action mark_relay() {
        ig_md.relay_dst = true;
    }

    @name(".Ingress.relay_addr")
    table relay_addr {
        key = {
            hdr.ipv4.dst_addr : exact;
            hdr.udp.dst_port  : range;
        }
        actions = {
            mark_relay;
            NoAction;
        }
        default_action = NoAction();
        size = RELAY_ADDR_TABLE_SIZE;
    }

    @name(".Ingress.relay_leg")
    action relay_leg(leg_t leg, bit<1> rtcp) {
        ig_md.relay_hit = true;
        ig_md.leg = leg;
        ig_md.rtcp_port_offset = (bit<16>)rtcp;
        /* what Egress (RtpQuality) needs; the parser set the rest of it */
        hdr.bridged.relay = 1;
        hdr.bridged.rtcp = rtcp;
        hdr.bridged._pad = 0;   /* the written bits stay one contiguous slice */
        hdr.bridged.leg = leg;
    }

    @name(".Ingress.relay")
    STAGE_T1_IPV6(0)
    table relay {
        key = {
            hdr.ipv4.src_addr : exact;
            hdr.ipv4.dst_addr : exact;
            hdr.udp.src_port  : exact;
            hdr.udp.dst_port  : exact;
            ig_md.bound_port  : exact;
        }
        actions = {
            relay_leg;
            @defaultonly NoAction;
        }
        default_action = NoAction();
        size = RELAY_TABLE_SIZE;
        idle_timeout = true;
    }

    @name(".Ingress.rewrite")
    action rewrite(ipv4_addr_t src_addr, ipv4_addr_t dst_addr,
                   l4_port_t src_port, l4_port_t dst_port) {
        hdr.ipv4.src_addr = src_addr;
        hdr.ipv4.dst_addr = dst_addr;
        hdr.udp.src_port = src_port + ig_md.rtcp_port_offset;
        hdr.udp.dst_port = dst_port + ig_md.rtcp_port_offset;
        ig_md.udp_csum_update = true;
        leg_counter.count();
    }

    @name(".Ingress.leg_rewrite")
    table leg_rewrite {
        key = {
            ig_md.leg : exact;
        }
        actions = {
            rewrite;
            @defaultonly NoAction;
        }
        default_action = NoAction();
        size = LEG_TABLE_SIZE;
        counters = leg_counter;
    }

    /* The guard's hit only marks the packet: relay_guard is looked up beside
     * relay (its key is the packet's own destination), and the drop and the
     * count follow once relay's miss is known (GuardCount). */
    @name(".Ingress.guard_drop")
    action guard_drop(leg_t leg) {
        ig_md.guard_hit = true;
        ig_md.guard_leg = leg;
    }

    @name(".Ingress.relay_guard")
    table relay_guard {
        key = {
            hdr.ipv4.dst_addr : exact;
            hdr.udp.dst_port  : exact;
        }
        actions = {
            guard_drop;
            @defaultonly NoAction;
        }
        default_action = NoAction();
        size = RELAY_GUARD_TABLE_SIZE;
    }

    action keep_zero_checksum() {
        ig_md.udp_csum_update = false;   /* zero stays zero */
    }

    /* Single-stage items, each gated by what it needs (Tofino 1 has no long
     * branches: a gated block over relay's stages would keep the clock,
     * learning and forwarding out of them). Congestion notices and INT
     * packets are routed, never relayed (RELAY_LOOKUP). relay_guard does not
     * wait for relay: both read only the packet, so the guard shares relay's
     * stages and only leg_rewrite follows them (README "Stages"). */
    apply {
        if (RELAY_LOOKUP) {
            relay_addr.apply();
        }
        if (RELAY_LOOKUP) {
            relay.apply();
        }
        if (RELAY_LOOKUP) {
            relay_guard.apply();
        }
        /* A missing leg_rewrite entry leaves the packet as it is: it goes
         * to the relay address, i.e. RTPProxy keeps relaying it. */
        if (ig_md.relay_hit) {
            leg_rewrite.apply();
        }
        if (ig_md.relay_hit && hdr.udp.checksum == 0) {
            keep_zero_checksum();
        }
    }
}

/* The guard's count, for both families (relay_guard and relay_guard6 name
 * the leg): one step after the relay tables of either, so the counter lives
 * in one stage. ig_md.guard_drop then tells the later steps (iRED) that the
 * packet is dropped. */
control GuardCount(inout ingress_metadata_t ig_md) {

    @name(".Ingress.guard_drops")
    Counter<bit<32>, leg_t>(LEG_TABLE_SIZE, CounterType_t.PACKETS) guard_drops;

    action guard_count() {
        guard_drops.count(ig_md.guard_leg);
        ig_md.guard_drop = true;
    }

    apply {
        if (GUARD_DROP || GUARD6_DROP) {
            guard_count();
        }
    }
}
