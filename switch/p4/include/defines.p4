/* p4relay — shared types and constants. */
#ifndef _P4RELAY_DEFINES_P4_
#define _P4RELAY_DEFINES_P4_

typedef bit<48> mac_addr_t;
typedef bit<32> ipv4_addr_t;
typedef bit<128> ipv6_addr_t;
typedef bit<16> l4_port_t;
typedef bit<16> nexthop_id_t;
/* Session-direction index: 21 bits in the contract (relay_leg.leg; 2^21
 * legs = 1M sessions x 2 directions on the software switch), so a larger
 * build needs no control-plane change. Registers and leg_rewrite hold
 * LEG_TABLE_SIZE of them per pipe; the client keeps leg < LEG_TABLE_SIZE. */
typedef bit<21> leg_t;

typedef bit<16> ether_type_t;
const ether_type_t ETHERTYPE_IPV4 = 16w0x0800;
const ether_type_t ETHERTYPE_VLAN = 16w0x8100;
const ether_type_t ETHERTYPE_ARP = 16w0x0806;
const ether_type_t ETHERTYPE_IPV6 = 16w0x86DD;

typedef bit<8> ip_protocol_t;
const ip_protocol_t IP_PROTOCOLS_UDP = 17;
const ip_protocol_t IP_PROTOCOLS_ICMPV6 = 58;

/* contract [config] unbound_port: the relay key's port on a port whose
 * binding is off. No dev port has it (Tofino 1 pipes have local ports 0-71;
 * the software switch 0-63), so it never aliases a bound port. */
#define UNBOUND_PORT 9w511

/* Learning digest selector (ig_dprsr_md.digest_type; 0 means none). */
const bit<3> DIGEST_TYPE_LEARN = 1;
/* the same for an IPv6 flow (pipe.IngressDeparser.learn6) */
const bit<3> DIGEST_TYPE_LEARN6 = 3;
/* First byte after the egress intrinsic metadata: what the packet is. */
const bit<8> PKT_TYPE_BRIDGED = 1;            /* a packet from ingress (bridged_h) */
#define PKT_TYPE_JITTER_WRITEBACK 8w2       /* E2E mirror copy (jitter_writeback_h) */
/* eg_dprsr_md.mirror_type of the jitter write-back copy. */
#define MIRROR_TYPE_JITTER_WRITEBACK ((MirrorType_t)1) /* 3 bits on Tofino 1, 4 on Tofino 2 */

/* iRED feedback copy (E2E mirror, recirculated to Ingress): pkt_type and
 * mirror_type. Its mirror session is IRED_SESSION_BASE + pipe (bootstrap:
 * "ired_feedback", to the pipe's recirculation port, truncated). */
/* 0x81: a recirculated frame starts with a unicast MAC (low bit 0), so the
 * ingress parser never takes one for a feedback copy. */
#define PKT_TYPE_IRED_FEEDBACK 8w0x81
#define MIRROR_TYPE_IRED ((MirrorType_t)3)
#ifndef IRED_SESSION_BASE
#define IRED_SESSION_BASE 1004
#endif
/* Registers indexed by the 9-bit dev_port. */
#define IRED_PORTS 512
/* DSCP Expedited Forwarding (RFC 3246): voice, spared by iRED's protection. */
#define DSCP_EF 6w46

/* Mirror sessions of the jitter write-back copies: session BASE + p sends to a
 * port of pipe p (the copy must pass the egress pipe whose registers it
 * writes). switch/bfrt/bootstrap.py creates them ("jitter_writeback"). */
#ifndef JITTER_WRITEBACK_SESSION_BASE
#define JITTER_WRITEBACK_SESSION_BASE 1000
#endif

/* contract [config] learn_filter_age_ms: an uninstalled flow reports again
 * after this many ms. */
#ifndef LEARN_FILTER_AGE_MS
#define LEARN_FILTER_AGE_MS 2000
#endif

/* PCIe CPU port: 192 on 2-pipe Tofino 1 (Wedge100BF-32X), 320 on 4-pipe
 * parts and tofino-model (build with -DCPU_PORT=320 there), 0 on Tofino 2.
 * ARP is punted there; the switch's Linux side answers (README "ARP"). */
#ifndef CPU_PORT
#if __TARGET_TOFINO__ == 2
#define CPU_PORT 0
#else
#define CPU_PORT 192
#endif
#endif

/* contract [config] rtp_clock_hz: RtpClock's shift constants are for 8 kHz. */
#define RTP_CLOCK_HZ 8000
#if RTP_CLOCK_HZ != 8000
#error "RtpClock converts ns to an 8 kHz clock; other rates need other shifts"
#endif
/* contract [config] jitter_shift: J is stored scaled by 2^JITTER_SHIFT and
 * moves by 1/2^JITTER_SHIFT of the difference per packet (RFC 3550 A.8). */
#define JITTER_SHIFT 4
#define JITTER_ROUND 8      /* 2^(JITTER_SHIFT - 1): A.8's "+ 8" */

/* RTP sequence numbers are "newer" when (seq - max) mod 2^16 is below half the space. */
#define RTP_SEQ_HALF_RANGE 16w0x8000

#ifdef WITH_REROUTE
/* Congestion reroute (controls/reroute.p4). A congestion notice is an
 * Ethernet frame of this type (IEEE 802 local experimental ethertype 1): the
 * notice header, then the IPv4 header of the flow's packet. */
const ether_type_t ETHERTYPE_REROUTE_NOTICE = 16w0x88B5;
/* reroute_notice_h.kind */
/* this switch's Egress to its own Ingress (recirculated): the mirror header's
 * pkt_type, so the copy's mirror header is the notice header unchanged */
const bit<8> REROUTE_NOTICE_LOCAL = 3;
const bit<8> REROUTE_NOTICE_UPSTREAM = 4;   /* to the switch the flow came from */
/* pipe.IngressDeparser.reroute kind */
const bit<8> REROUTE_MOVED = 1;             /* the flow now takes its backup next hop */
const bit<8> REROUTE_NOTIFIED = 2;          /* no backup here: notice sent upstream */
const bit<8> REROUTE_RELAYED = 3;           /* an upstream notice passed on upstream */
const bit<3> DIGEST_TYPE_REROUTE = 2;
#endif
#define PKT_TYPE_REROUTE_NOTICE 8w3         /* E2E mirror copy (reroute_mirror_h) */
#define MIRROR_TYPE_REROUTE_NOTICE ((MirrorType_t)2)
/* Mirror session of a notice about a flow that entered on pipe p: BASE + p,
 * to that pipe's recirculation port (the flow's reroute_active lives in its
 * ingress pipe). switch/bfrt/bootstrap.py creates them ("reroute_notice"). */
#ifndef REROUTE_NOTICE_SESSION_BASE
#define REROUTE_NOTICE_SESSION_BASE 1010
#endif
/* Pipe-local number of the recirculation port: only a notice or an iRED
 * feedback copy arriving there is taken for one. Tofino 1: 68 (68, 196, 324,
 * 452). Tofino 2: its recirculation ports are local ports 0-7 (pipe 0: 0 the
 * PCIe CPU port, 2-5 the CPU Ethernet ports) and 68 is a front-panel port:
 * 6 (6, 134, 262, 390). switch/bfrt/bootstrap.py's targets follow. */
#if __TARGET_TOFINO__ == 2
#define RECIRC_PORT_LOCAL 7w6
#else
#define RECIRC_PORT_LOCAL 7w68
#endif
/* PORT_METADATA_SIZE as a number, for a lookahead past the port metadata */
#if __TARGET_TOFINO__ == 2
#define PORT_METADATA_BITS 192
#else
#define PORT_METADATA_BITS 64
#endif

#endif /* _P4RELAY_DEFINES_P4_ */
