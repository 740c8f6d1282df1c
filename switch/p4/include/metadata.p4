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

struct ingress_metadata_t {
    /* parser results */
    bool    ipv4_checksum_err;    /* header checksum wrong (ihl == 5 only)   */
    bool    ipv4_malformed;       /* ihl < 5                                  */
    bit<16> ipv4_csum_residual;   /* sum of the IPv4 header minus the words we rewrite */
    bit<16> udp_csum_residual;    /* same for the UDP checksum (pseudo header + ports) */
    bool    udp_csum_update;      /* rewrite the UDP checksum in the deparser */
    bool    ipv4_csum_update;

    /* forwarding */
    nexthop_id_t nexthop_id;
    PortId_t     ingress_port;    /* copy for the digest */

    /* relay */
    bool    relay_dst;            /* hit relay_addr: destination is a relay address:port */
    bool    relay_hit;            /* hit relay */
    bool    guard_drop;           /* hit relay_guard: foreign source, drop */
    leg_t   leg;
    bit<1>  rtcp;
    bit<16> rtcp_port_offset;     /* 0 for RTP, 1 for RTCP (ports are RTP + 1) */

    /* time (MsClock) */
    bit<32> now_ms;               /* ingress MAC time in ms (wraps at 2^32) */

    /* learning */
    bit<LEARN_FILTER_INDEX_BITS> learn_slot;
}

struct egress_metadata_t {
    /* jitter write-back: the copy's mirror header. Extracted by the parser on
     * the copy's own egress pass; filled (setValid) on the RTP packet's pass. */
    jitter_writeback_h writeback;
    MirrorId_t         writeback_session;

    /* time (MsClock, RtpClock), from the egress global timestamp */
    bit<32> now_ms;               /* departure time in ms (wraps at 2^32)       */
    bit<32> now_clk;              /* departure time in RTP clock units (8 kHz)  */

    /* RTP quality */
    bit<32> rtp_count_before;     /* rtp_packets before this packet: 0 = first   */
    bit<16> rtp_seq_delta;        /* seq - highest seen (mod 2^16)               */
    bit<32> rtp_lost_inc;
    bit<32> rtp_transit;          /* departure - RTP timestamp, clock units      */
    bit<32> rtp_transit_delta;    /* D of RFC 3550 A.8                           */
    bit<32> jitter_plus_8;        /* stored jitter + 8                           */
    bit<32> jitter_decay;         /* (jitter + 8) >> 4                           */
    bit<32> jitter_grown;         /* jitter + |D|                                */
}

#endif /* _P4RELAY_METADATA_P4_ */
