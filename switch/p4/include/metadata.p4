/* p4relay — user metadata of both gresses and the learning digest layout. */
#ifndef _P4RELAY_METADATA_P4_
#define _P4RELAY_METADATA_P4_

/* contract digest pipe.IngressDeparser.learn: fields by member name. */
struct learn_digest_t {
    ipv4_addr_t src_addr;
    ipv4_addr_t dst_addr;
    l4_port_t   src_port;
    l4_port_t   dst_port;
    PortId_t    ingress_port;
}

/* contract digest pipe.IngressDeparser.learn6: the same for an IPv6 flow. */
struct learn6_digest_t {
    ipv6_addr_t src_addr;
    ipv6_addr_t dst_addr;
    l4_port_t   src_port;
    l4_port_t   dst_port;
    PortId_t    ingress_port;
}

#ifdef WITH_REROUTE
/* contract digest pipe.IngressDeparser.reroute: one per reroute or upstream
 * notice, fields by member name. */
struct reroute_digest_t {
    ipv4_addr_t dst_addr;        /* the flow's destination (reroute_watch key) */
    bit<16>     slot;
    bit<8>      kind;            /* REROUTE_MOVED or REROUTE_NOTIFIED */
    PortId_t    port;            /* the flow's ingress port at the switch that saw the congestion */
    bit<32>     queue_delay_ns;  /* trigger values from the notice */
    bit<16>     run;
    bit<8>      flow_class;
    bit<1>      from_int;        /* 1: seen in INT at the sink (a hop of the path), 0: own delay */
    bit<32>     hop_switch_id;   /* from_int: the hop the sink saw at/over onset (0: not named) */
    bit<16>     hop_port;        /* ... its egress port */
}
#endif

/* Phase-0 data of an ingress port (pipe.IngressParser.$PORT_METADATA, data
 * field by member name): unbound = 1 turns port binding off for the port
 * (IngressParser, state parse_port_metadata). */
struct port_binding_t {
    bit<1> unbound;
}

struct ingress_metadata_t {
    /* parser results */
    bool    ipv4_checksum_err;    /* header checksum wrong (ihl == 5 only)   */
    bool    ipv4_malformed;       /* ihl < 5                                  */
    bool    ipv6_malformed;       /* IPv6 ethertype, version != 6             */
    bool    icmp6_ndp;            /* ICMPv6 NDP or MLD: to the CPU port       */
    bit<16> udp_csum_residual;    /* UDP sum without the pseudo-header addresses and the ports */
    bool    udp_csum_update;      /* rewrite the UDP checksum in the deparser */
    l4_port_t l4_src_port;        /* UDP ports as they arrived (the learn filters' hash) */
    l4_port_t l4_dst_port;

    /* forwarding */
    nexthop_id_t nexthop_id;
    bool         forwarded;       /* nexthop's forward ran: an egress port is set */
    PortId_t     ingress_port;    /* copy for the digest */
    port_binding_t port_binding;  /* the port's phase-0 data                */
    PortId_t     bound_port;      /* relay's and the learn filter's port:     */
                                  /* ingress_port, or UNBOUND_PORT            */

    /* relay */
    bool    relay_dst;            /* hit relay_addr (relay6_addr): destination is a relay address:port */
    /* IPv6 relay (RelaySessions6): fields of their own, so no IPv4 step
     * waits for an IPv6 table that writes them (and the other way round) */
    bool    relay6_dst;           /* hit relay6_addr                          */
    bit<8>  relay_id;             /* its id of the relay's IPv6 address (relay6, relay_guard6 key) */
    bool    relay6_hit;           /* hit relay6                               */
    bool    guard6_hit;           /* hit relay_guard6 (its leg: guard_leg)    */
    leg_t   leg6;                 /* key of leg_rewrite6                      */
    bit<16> rtcp6_port_offset;
    bool    relay_hit;            /* hit relay */
    bool    guard_hit;            /* hit relay_guard (looked up beside relay) */
    leg_t   guard_leg;            /* its entry's leg: the guard_drops index  */
    bool    guard_drop;           /* guard hit, relay_addr hit, relay miss: foreign source, drop */
    leg_t   leg;                  /* key of leg_rewrite (hdr.bridged carries it to Egress) */
    bit<16> rtcp_port_offset;     /* 0 for RTP, 1 for RTCP (ports are RTP + 1) */

    /* time (MsClock) */
    bit<32> now_ms;               /* ingress MAC time in ms (wraps at 2^32) */
#ifdef WITH_REROUTE
    /* reroute (Reroute) */
    bool         rr_has_backup;   /* reroute_watch hit with reroute_backup */
    bit<16>      rr_slot;
    nexthop_id_t rr_backup;
    PortId_t     rr_primary_port; /* an upstream notice is accepted only from here */
    bit<8>       rr_active;       /* reroute_active before this packet: 1 = on the backup */
    bit<8>       rr_kind;         /* digest kind */
    bit<8>       rr_moved_from;   /* a notice's move: reroute_active before it (1: no move) */
    bool         rr_upstream;     /* this notice leaves again, upstream */
#if __TARGET_TOFINO__ == 2
    PortId_t     rr_from_port;    /* reroute_from's port for notice_relay (relay_from_port) */
#endif
#endif

#ifdef WITH_INT
    /* INT (int_source.p4) */
    bool    int_malformed;        /* the parser rejected the INT stack */
    int_report_mirror_h int_mirror;   /* the report copy's mirror header */
    MirrorId_t int_mirror_session;
#endif
#ifdef WITH_IRED
    /* IredDrop */
    bit<8>  ired_flag;            /* the egress port's drop flag as found */
    bool    ired_protected;       /* relay hit, DSCP EF or signalling (ired_spare) */
    bit<6>  dscp;                 /* the packet's DSCP, either family (ired_spare's key) */
    bool    ired_sip;             /* hit ired_spare: the operator's signalling class */
#endif

}

struct egress_metadata_t {
#ifdef WITH_INT
    /* INT hop (int_transit.p4) and report (int_sink.p4) */
    bit<32> int_switch_id;
    bit<16> int_onset_bits;       /* onset + this hop's place bit (source_hop / transit_hop) */
    bit<32> int_onset_cells_d;    /* onset threshold |-| occupancy: 0 = at/over */
    bit<32> int_onset_ns_d;
    bit<32> int_clear_cells_d;    /* occupancy |-| clear threshold: != 0 = over */
    bit<32> int_clear_ns_d;
    bit<16> int_word;             /* this hop's path-signature word */
    bit<16> int_strip;            /* bytes the sink removes */
    bool    int_csum;             /* IPv4 header changed: new checksum */
    bit<16> int_sig16;            /* the report copy's path signature */
    bit<8>  int_path_changed;
    bit<8>  int_cong_want;        /* 1 onset, 0 clear, 2 keep */
    bit<8>  int_cong_was;         /* congestion change: 0 none, 1 clear, 2 onset */
    bit<8>  int_interval_due;
    bit<1>  int_on;               /* int_hop_config hit: this switch adds its hop */
    bit<32> int_seq;              /* int_report_seq before this report */
    bit<16> int_rep_words;        /* the report's words after its group header, x 4 */
    PortId_t int_sink_port;       /* the sink port whose hop the report carries */
    bit<1>  int_sink_md;          /* the report copy carries the sink's hop */
    bit<32> int_sink_depth;       /* the sink port's last departure: deq_qdepth */
    bit<32> int_sink_latency;     /* and deq_timedelta */
#ifdef WITH_INT6
    /* IPv6 keeps a valid UDP checksum with INT on board (RFC 8200 8.1):
     * the egress parser's residual (the datagram's sum without the
     * payload length, UDP length, shim and MD header it found) and the
     * deparser's go */
    bit<16> int_udp_res;
    bool    int_udp6;
    bit<8>  int_tc6;              /* the traffic class (source_hop6: its DSCP) */
    bit<6>  int_shim_dscp;        /* the shim's DSCP (the sink's restore6) */
#endif
#endif
    /* a reroute notice goes with this packet (RerouteDetect): the packet's
     * one mirror; 0 without reroute */
    bit<1>  rr_notice;
    /* length check */
    bit<16> l3_end;               /* L2 header + total_len: where IPv4 claims to end */
    bit<16> l3_overrun;           /* bytes claimed beyond the frame (0 = fits)    */
#ifdef WITH_QUEUE_DELAY
    /* queueing delay, ns: eg_intr_md.deq_timedelta, the traffic manager's
     * enqueue-to-dequeue time (18 bits on Tofino 1: saturates near 262 us;
     * the software switch measures its FIFO's full delay). */
    bit<32> queue_delay_ns;
#endif
#ifdef WITH_REROUTE
    /* reroute detection (RerouteDetect) */
    bit<1>  rr_hit;               /* reroute_class hit                           */
    bit<32> rr_t_q;               /* the class's threshold, whole ticks (ns >> 16) */
    bit<16> rr_m;                 /* the class's m                               */
    bit<32> rr_delay;             /* ingress-to-egress delay, 65,536 ns ticks:
                                   * the 48-bit timestamps' bits 47..16 apart  */
    bit<32> rr_delay_ns;          /* the same in ns (ticks << 16): the notice's */
    bit<32> rr_over;              /* rr_delay - t_q, saturating: 0 = clear     */
    bit<16> rr_run;               /* consecutive hot packets, this one incl.   */
    bit<16> rr_left;              /* m - run: 0 = this packet is the m-th        */
    bit<8>  rr_pkt_type;          /* PKT_TYPE_REROUTE_NOTICE (parser constant): the mirror header's first byte */
    MirrorId_t rr_session;        /* BASE + the flow's ingress pipe              */
    bit<32> rr_hop_switch;        /* the notice's congested hop (INT, at the sink): */
    bit<16> rr_hop_port;          /* switch id, egress port; 0: not named        */
#ifdef WITH_INT
    int_hop_id_h rr_hop;          /* the sink: the hop its INT stack marks at/over
                                   * onset (egress parser; never emitted)      */
#endif
#endif
#ifdef WITH_RTP_QUALITY
    /* jitter write-back: the copy's mirror header. Extracted by the parser on
     * the copy's own egress pass; filled (setValid) on the RTP packet's pass. */
    jitter_writeback_h writeback;
    MirrorId_t         writeback_session;   /* BASE + this egress pipe (parser) */

    /* time (MsClock, RtpClock), from the egress global timestamp */
    bit<32> now_ms;               /* departure time in ms (wraps at 2^32)       */

    /* RTP quality */
    bit<1>  rtp_on;               /* relayed RTP of an offloaded leg, length ok  */
    bit<8>  rtp_seen;             /* the leg had packets before this one         */
    bit<16> rtp_seq_m1;           /* sequence number - 1                         */
    bit<16> rtp_loss_code;        /* seq - max - 1 (0xFFFF: not computed)        */
    bit<32> rtp_transit;          /* departure - RTP timestamp, clock units      */
    bit<32> rtp_transit_abs_d;    /* |D| of RFC 3550 A.8                         */
    bit<32> jitter_plus_8;        /* J + 8 (rtp_jitter's read)                   */
    bit<32> jitter_decay;         /* (J + 8) >> 4                                */
    bit<32> jitter_grown;         /* J + 8 + |D|                                 */
#endif
#ifdef WITH_IRED
    /* Ired: the port's configuration (ired_port) and the decision's steps */
    ired_feedback_h ired_mirror;  /* the feedback copy's mirror header          */
    MirrorId_t ired_session;      /* IRED_SESSION_BASE + this egress pipe       */
    bit<1>  ired_on;
    bit<1>  ired_tail_drop;
    bit<1>  ired_eligible;        /* on, not tail-drop mode, not relayed RTP    */
    bit<1>  ired_protect;
    bit<8>  ired_flag;            /* the feedback's flag: 1, or 3 with protect  */
    bit<3>  ired_ewma_n;
    bit<32> ired_max_len;         /* maxLenQueue, cells                         */
    bit<32> ired_n_drop;          /* N, cells                                   */
    bit<32> ired_cur;             /* deq_qdepth                                 */
    bit<32> ired_enq;             /* enq_qdepth                                 */
    bit<32> ired_prev;            /* the previous sample                        */
    bit<32> ired_prev_decay;      /* prev >> n                                  */
    bit<32> ired_cur_n;           /* cur >> n                                   */
    bit<32> ired_prev_kept;       /* prev - (prev >> n)                         */
    bit<32> ired_avg;             /* qAvg = prev - (prev >> n) + (cur >> n)     */
    bit<32> ired_half;            /* maxLenQueue / 2                            */
    bit<32> ired_min;             /* minThsld                                   */
    bit<32> ired_max;             /* maxThsld                                   */
    bit<32> ired_below;           /* minThsld -| qAvg: 0 = qAvg >= minThsld     */
    bit<32> ired_above;           /* qAvg -| maxThsld: 0 = qAvg <= maxThsld     */
    bit<32> ired_band;            /* below | above: 0 = in the band             */
    bit<32> ired_room;            /* maxLenQueue -| enq_qdepth: 0 = full        */
    bit<16> ired_rand;
    bit<8>  ired_coin;            /* 1: the band's coin says drop               */
#endif
}

#if __TARGET_TOFINO__ != 2
/* a leg's loss counts on Tofino 1, one cell of pipe.Egress.rtp_loss
 * (include/rtp_loss.p4) */
struct rtp_loss_t {
    bit<32> lost;
    bit<32> reordered;
}
#endif

#endif /* _P4RELAY_METADATA_P4_ */
