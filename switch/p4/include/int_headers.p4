/* p4relay — in-band network telemetry: INT-MD over UDP (INT spec v2.1) and
 * the telemetry report (Telemetry Report v2.0), for WITH_INT.
 *
 * On the wire, between the UDP header and the UDP payload of a watched flow:
 *   int_shim_h (4 B) | int_md_h (12 B) | int_hop_h x hops (40 B each, newest first)
 * marked by DSCP INT_DSCP in the IPv4 header (IPv6: its traffic class). The
 * shim keeps the original DSCP, the MD header's domain-specific fields keep
 * the original UDP checksum, so the sink restores the datagram byte for
 * byte. Over IPv4 the UDP checksum is 0 while INT is on board (IPv4 allows
 * it); over IPv6 every hop keeps it valid (int_transit.p4). Lengths:
 * shim.len counts 4-byte words of shim + MD header + stack (4 + 5 per hop).
 * IPv4 packets without options carry INT, and on Tofino 2 (WITH_INT6)
 * IPv6 packets with UDP right after the fixed header.
 */
#ifndef _P4RELAY_INT_HEADERS_P4_
#define _P4RELAY_INT_HEADERS_P4_

/* INT over IPv6 (WITH_INT and WITH_IPV6): Tofino 2 only. On Tofino 1 the
 * sink's egress parser would have to reach 20 bytes past the 160 it parses
 * (the IPv6 header is 20 bytes longer than IPv4's, see INT_MAX_HOPS), and
 * standard-v6 has no stage left for int_watch6. */
#if defined(WITH_INT) && defined(WITH_IPV6) && __TARGET_TOFINO__ == 2
#define WITH_INT6
#endif

/* contract [config] int_*: the marker, the layout and the bounds. */
#define INT_DSCP 6w0x17               /* DSCP that marks a packet carrying INT */
#define INT_TYPE_MD 4w1
#define INT_VERSION 4w2
#define INT_HOP_WORDS 5w5             /* 20-byte hop */
#define INT_INSTRUCTIONS 16w0xF100    /* bits 0-3, 7 */
#define INT_DS_ID 16w0x7072           /* p4relay's domain-specific fields */
/* Tofino 1 parses at most 160 bytes deep: the sink's egress parser must
 * reach past the stack (it skips it to strip it), after the bridged headers,
 * Ethernet, 802.1Q, IPv4 (INT packets carry no IPv4 options), UDP, shim and
 * MD header; 2 hops of 20 bytes fit. */
#ifndef INT_MAX_HOPS
#define INT_MAX_HOPS 2
#endif
#if INT_MAX_HOPS != 2
#error "the parsers list the shim lengths of 1..2 hops"
#endif
#define INT_FLAG_ONSET 16w0x8000      /* ds_flags: a hop at/over its onset threshold */
#define INT_FLAG_OVER_CLEAR 16w0x4000 /* ds_flags: a hop over its clear threshold */
/* ds_flags: which hop was at/over onset, by its place from the source (the
 * sink names it in its reroute notice): the second hop, the first (the
 * source's) */
#define INT_FLAG_ONSET_HOP2 16w0x2000
#define INT_FLAG_ONSET_HOP1 16w0x1000
#define INT_SIG_MASK 16w0x0FFF        /* ds_flags: path signature */
#define INT_SOURCE_BYTES 36           /* shim 4 + MD 12 + one hop 20 */
#define INT_HOP_BYTES 20
/* Per-flow suppression state: INT_FLOW_SLOTS slots, index = XOR fold of the
 * 5-tuple (int_source.p4). */
#define INT_FLOW_SLOTS 4096
#ifndef INT_REPORT_INTERVAL_MS
#define INT_REPORT_INTERVAL_MS 1000
#endif
/* The sink's report copy: I2E mirror, session INT_REPORT_SESSION (bootstrap
 * points it at the collector's port, the port of the int_report entry). */
#define PKT_TYPE_INT_REPORT 8w4
#define MIRROR_TYPE_INT_REPORT ((MirrorType_t)1)
#ifndef INT_REPORT_SESSION
#define INT_REPORT_SESSION 1020
#endif

/* INT v2.1 shim for UDP: type 1 = INT-MD, NPT 0 (IP protocol says what
 * follows); the original DSCP in the last byte, in the 6 bits it has in the
 * IPv4 header's DS byte (bits 7..2). */
header int_shim_h {
    bit<4>  int_type;
    bit<2>  npt;
    bit<2>  rsvd;
    bit<8>  len;
    bit<8>  rsvd2;
    bit<6>  dscp;
    bit<2>  rsvd3;
}

/* INT-MD metadata header (v2.1). Domain-specific fields, domain INT_DS_ID:
 * ds_instruction = the UDP checksum the source found; ds_flags bit 15 = a hop
 * saw queue depth or hop latency at or over its onset threshold, bit 14 = a
 * hop was over its clear threshold, bit 13 / 12 = the second / first hop from
 * the source was at or over onset, bits 11..0 = path signature (XOR of each
 * hop's word, int_transit.p4). */
header int_md_h {
    bit<4>  ver;
    bit<1>  d;
    bit<1>  e;               /* a hop could not add its metadata (hop limit) */
    bit<1>  m;
    bit<12> rsvd;
    bit<5>  hop_ml;          /* words per hop: INT_HOP_WORDS */
    bit<8>  remaining_hop_cnt;
    bit<16> instruction_bitmap;
    bit<16> ds_id;
    bit<16> ds_instruction;
    bit<16> ds_flags;
}

/* One hop, instruction bits 0-3 and 7 of INT v2.1 (bitmap INT_INSTRUCTIONS):
 * node id; level-1 ingress and egress port; hop latency (the time in the
 * egress queue, ns: deq_timedelta); queue id + occupancy at dequeue
 * (deq_qdepth, cells); egress tx utilisation as the port's running byte
 * count (mod 2^32: the collector divides its increase by the time between
 * two reports). 20 bytes. */
header int_hop_h {
    bit<32> switch_id;
    bit<16> ingress_port;
    bit<16> egress_port;
    bit<32> hop_latency;
    bit<8>  queue_id;
    bit<24> queue_occupancy;
    bit<32> tx_bytes;
}

/* The leading fields of the hop at/over onset, read by the sink's egress
 * parser (into metadata: never emitted) so its reroute notice names the
 * congested hop. 8 bytes; the hop's other 12 are skipped. */
header int_hop_id_h {
    bit<32> switch_id;
    bit<16> ingress_port;
    bit<16> egress_port;
}

/* Telemetry Report v2.0: group header, individual report header and the
 * individual report's main contents; the sink's packet (Ethernet onwards,
 * INT on board) follows as the report's payload (in_type 3 = Ethernet). */
header tr_group_h {
    bit<4>  ver;             /* 2 */
    bit<6>  hw_id;
    bit<22> seq_no;
    bit<32> node_id;
}

header tr_individual_h {
    bit<4>  rep_type;        /* 1 = INT */
    bit<4>  in_type;         /* 3 = Ethernet */
    bit<8>  rep_len;         /* words of this report after the group header */
    bit<8>  md_len;          /* words of metadata in it (0: all in the INT stack) */
    bit<1>  d;
    bit<1>  q;               /* congestion onset */
    bit<1>  f;               /* tracked flow */
    bit<1>  i;
    bit<4>  rsvd;
    bit<16> rep_md_bits;
    bit<16> ds_id;
    bit<16> ds_md_bits;
    bit<16> ds_md_status;    /* 0: the collector reads the INT stack */
}

/* The sink's own hop, the individual report's metadata (rep_md_bits
 * INT_REPORT_MD_BITS: bits 0-2, level-1 ports, hop latency, queue id +
 * occupancy; md_len INT_REPORT_MD_WORDS; its node id is the group header's):
 * the sink's egress port as its last departure left it (int_sink.p4). */
header tr_sink_md_h {
    bit<16> ingress_port;
    bit<16> egress_port;
    bit<32> hop_latency;
    bit<8>  queue_id;
    bit<24> queue_occupancy;
}
#define INT_REPORT_MD_BITS 16w0xE000
#define INT_REPORT_MD_WORDS 8w3

/* Ingress -> egress, beside bridged_h (WITH_INT): the roles Ingress chose
 * for this packet and what the hop needs of ingress. 40 bits. */
header int_bridged_h {
    bit<16>  ingress_port;   /* the dev port, as the hop carries it */
    bit<1>   source;         /* watched (int_watch), no INT yet: insert at a transit port */
    bit<1>   transit;        /* egress port is in the INT domain: add a hop */
    bit<1>   sink;           /* egress port leaves the domain: strip */
    bit<5>   _pad;
    bit<7>   _pad2;
    PortId_t sink_port;      /* the sink: its egress port (the register its
                              * reports read; the egress parser cannot read
                              * eg_intr_md.egress_port there) */
}
#define INT_BRIDGED_H_BITS 40

/* Mirror header of the sink's report copy (I2E mirror): what the copy's
 * egress pass needs to decide on the report and to add the sink's own hop,
 * computed by the sink's ingress; the copy's packet follows (bridged
 * headers, then the frame). 96 bits. */
header int_report_mirror_h {
    bit<8>  pkt_type;        /* PKT_TYPE_INT_REPORT */
    bit<16> flow_slot;       /* suppression slot of the flow */
    bit<16> ds_flags;        /* the MD header's flags + path signature */
    bit<16> frame_len;       /* the frame: L2 header + IPv4 total_len */
    bit<8>  _pad;
    bit<7>  _pad2;
    PortId_t ingress_port;   /* the packet's ports at the sink */
    bit<7>  _pad3;
    PortId_t egress_port;
}

#endif /* _P4RELAY_INT_HEADERS_P4_ */
