/* p4relay — packet headers and the header structs of both gresses. */
#ifndef _P4RELAY_HEADERS_P4_
#define _P4RELAY_HEADERS_P4_

header ethernet_h {
    mac_addr_t   dst_addr;
    mac_addr_t   src_addr;
    ether_type_t ether_type;
}

header vlan_tag_h {
    bit<3>       pcp;
    bit<1>       dei;
    bit<12>      vid;
    ether_type_t ether_type;
}

/* Fixed 20-byte IPv4 header; options follow as up to ten 32-bit words. */
header ipv4_h {
    bit<4>        version;
    bit<4>        ihl;
    bit<8>        diffserv;
    bit<16>       total_len;
    bit<16>       identification;
    bit<1>        flag_reserved;
    bit<1>        flag_df;
    bit<1>        flag_mf;
    bit<13>       frag_offset;
    bit<8>        ttl;
    ip_protocol_t protocol;
    bit<16>       hdr_checksum;
    ipv4_addr_t   src_addr;
    ipv4_addr_t   dst_addr;
}

/* One 32-bit word of IPv4 options. Ten fixed headers instead of a varbit:
 * the parser extracts exactly ihl - 5 of them (one state per word) and adds
 * each to the header-checksum verification; they are emitted unchanged. */
header ipv4_option_word_h {
    bit<32> data;
}

struct ipv4_options_t {
    ipv4_option_word_h w0;
    ipv4_option_word_h w1;
    ipv4_option_word_h w2;
    ipv4_option_word_h w3;
    ipv4_option_word_h w4;
    ipv4_option_word_h w5;
    ipv4_option_word_h w6;
    ipv4_option_word_h w7;
    ipv4_option_word_h w8;
    ipv4_option_word_h w9;
}

/* Fixed 40-byte IPv6 header. Extension headers are not parsed: a packet
 * whose next header is not UDP or ICMPv6 is routed, never relayed. */
header ipv6_h {
    bit<4>        version;
    bit<8>        traffic_class;
    bit<20>       flow_label;
    bit<16>       payload_len;
    ip_protocol_t next_hdr;
    bit<8>        hop_limit;
    ipv6_addr_t   src_addr;
    ipv6_addr_t   dst_addr;
}

/* ICMPv6 type, code and checksum: what decides whether it goes to the CPU
 * (NDP, MLD, link-local); emitted unchanged. */
header icmpv6_h {
    bit<8>  type;
    bit<8>  code;
    bit<16> checksum;
}

header udp_h {
    l4_port_t src_port;
    l4_port_t dst_port;
    bit<16>   hdr_length;
    bit<16>   checksum;
}

/* RTP v2 fixed header (RFC 3550 5.1); CSRCs and extensions stay payload. */
header rtp_h {
    bit<2>  version;
    bit<1>  padding;
    bit<1>  extension;
    bit<4>  csrc_count;
    bit<1>  marker;
    bit<7>  payload_type;
    bit<16> sequence_number;
    bit<32> timestamp;
    bit<32> ssrc;
}

/* Ingress -> egress bridged metadata, prepended by the ingress deparser to
 * every packet that goes through egress (everything but ARP to the CPU, which
 * bypasses egress) and stripped by the egress deparser. pkt_type comes first
 * so the egress parser tells it from a jitter write-back copy (both start
 * right after the egress intrinsic metadata). 32 bits. */
header bridged_h {
    bit<8> pkt_type;   /* PKT_TYPE_BRIDGED */
    bit<1> relay;      /* hit pipe.Ingress.relay: an offloaded session's packet */
    bit<1> rtcp;       /* the relay entry's rtcp bit */
    bit<1> _pad;
    leg_t  leg;        /* the relay entry's leg: quality register index */
#ifdef WITH_REROUTE
    bit<1>   rr_detect;       /* a watched flow on its primary next hop: count its packets over t_q */
    bit<7>   _rr_pad;
    bit<8>   rr_class;        /* its flow class (pipe.Egress.reroute_class); 0 = unwatched */
    bit<16>  rr_slot;         /* its state slot (reroute_active, reroute_run) */
    bit<1>   rr_int;          /* Egress (the sink): a hop of its INT over onset */
    bit<6>   _rr_pad2;
    PortId_t rr_ingress_port; /* where it came from: where a notice for it goes upstream */
    bit<32>  rr_ingress_ts;   /* ingress_mac_tstamp[47:16] (65,536 ns ticks):
                               * detection's delay is egress global_tstamp[47:16]
                               * minus this, in whole ticks (no saturation) */
#endif
}
#ifdef WITH_REROUTE
#define BRIDGED_H_BITS 112
#else
#define BRIDGED_H_BITS 32
#endif

#ifdef WITH_REROUTE
/* Congestion notice (ETHERTYPE_REROUTE_NOTICE), followed by the IPv4 header
 * of the flow's packet (its dst_addr names the flow for the receiver's
 * reroute_watch). 18 bytes. */
header reroute_notice_h {
    bit<8>   kind;            /* REROUTE_NOTICE_LOCAL (= PKT_TYPE_REROUTE_NOTICE) or _UPSTREAM */
    bit<8>   flow_class;
    bit<1>   from_int;        /* 1: a hop in the packets' INT was over onset (the sink's
                               * detection); 0: the detecting switch's own delay over t_q */
    bit<6>   _pad;
    PortId_t port;            /* the flow's ingress port at the detecting switch */
    bit<16>  slot;            /* that switch's slot for the flow */
    bit<16>  run;             /* consecutive hot packets (= m) */
    bit<32>  queue_delay_ns;  /* ingress-to-egress delay of the m-th packet there */
    bit<32>  hop_switch_id;   /* from_int: the INT switch id of the hop at/over onset */
    bit<16>  hop_port;        /* ... and its egress port (both 0: not named) */
}

/* Mirror header of a notice copy (E2E mirror, RerouteDetect): the notice
 * header's layout, pkt_type in place of kind; the copy's egress parser
 * extracts it as hdr.reroute_notice. 18 bytes. */
header reroute_mirror_h {
    bit<8>   pkt_type;        /* PKT_TYPE_REROUTE_NOTICE */
    bit<8>   flow_class;
    bit<1>   from_int;
    bit<6>   _pad;
    PortId_t port;
    bit<16>  slot;
    bit<16>  run;
    bit<32>  queue_delay_ns;
    bit<32>  hop_switch_id;
    bit<16>  hop_port;
}
#endif

/* Mirror header of the jitter write-back copy (E2E mirror, RtpQuality):
 * the leg and its new RFC 3550 jitter, computed when the RTP packet left the
 * queue and written when the copy passes egress. 64 bits. */
header jitter_writeback_h {
    bit<8>  pkt_type;  /* PKT_TYPE_JITTER_WRITEBACK */
    bit<3>  _pad;
    leg_t   leg;
    bit<32> jitter;
}

/* iRED feedback copy (E2E mirror of the deciding packet, truncated): which
 * port's ingress drop flag to set and to what (1, or 3 = spare protected
 * packets). Re-enters Ingress through the recirculation port. 32 bits;
 * (_pad, port) is laid out like the egress intrinsic metadata's port field,
 * so it is copied as one 16-bit container. */
header ired_feedback_h {
    bit<8> pkt_type;   /* PKT_TYPE_IRED_FEEDBACK */
    bit<7> _pad;
    bit<9> port;
    bit<8> flag;
}

struct ingress_headers_t {
    bridged_h      bridged;       /* emitted first; only egress reads it */
#ifdef WITH_INT
    int_bridged_h  int_bridged;   /* emitted second; only egress reads it */
#endif
#ifdef WITH_IRED
    ired_feedback_h ired_feedback; /* a recirculated feedback copy (dropped in Ingress) */
#endif
    ethernet_h     ethernet;
#ifdef WITH_REROUTE
    reroute_notice_h reroute_notice;
#endif
    vlan_tag_h     vlan_tag;
    ipv4_h         ipv4;
    ipv4_options_t ipv4_options;
    ipv6_h         ipv6;
    icmpv6_h       icmpv6;
    udp_h          udp;
#ifdef WITH_INT
    int_shim_h     int_shim;      /* parsed to check it; never rewritten here */
    int_md_h       int_md;
#endif
    rtp_h          rtp;
}

/* Egress parses the bridged header, then IPv4 (the length check needs
 * total_len) and, with RTP quality, the option words, UDP and the RTP fixed
 * header (RtpQuality). The deparser emits everything but `bridged`. */
struct egress_headers_t {
#ifdef WITH_IRED
    ired_feedback_h ired_feedback; /* the feedback copy's own pass: emitted first */
#endif
    bridged_h      bridged;
#ifdef WITH_INT
    int_bridged_h       int_bridged;
    int_report_mirror_h int_report_mirror;   /* the sink's report copy */
    /* the report's encapsulation, emitted before the copied frame */
    ethernet_h      report_ethernet;
    ipv4_h          report_ipv4;
    udp_h           report_udp;
    tr_group_h      report_group;
    tr_individual_h report_individual;
    tr_sink_md_h    report_sink_md;      /* the sink's own hop */
#endif
    ethernet_h     ethernet;
#ifdef WITH_REROUTE
    reroute_notice_h reroute_notice;   /* made valid on a notice copy's pass */
#endif
    vlan_tag_h     vlan_tag;
    ipv4_h         ipv4;
    ipv4_options_t ipv4_options;
    ipv6_h         ipv6;
    udp_h          udp;
#ifdef WITH_INT
    int_shim_h     int_shim;
    int_md_h       int_md;
    int_hop_h      int_hop;       /* this switch's hop, pushed on the stack */
#endif
    rtp_h          rtp;
}

#endif /* _P4RELAY_HEADERS_P4_ */
