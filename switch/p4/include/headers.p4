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

/* Resubmit data, exactly 64 bits on Tofino 1: the leg and its new jitter,
 * computed in the first pass and written in the second. */
header jitter_resubmit_h {
    leg_t   leg;
    bit<11> _pad;
    bit<32> jitter;
}

struct ingress_headers_t {
    ethernet_h     ethernet;
    vlan_tag_h     vlan_tag;
    ipv4_h         ipv4;
    ipv4_options_t ipv4_options;
    udp_h          udp;
    rtp_h          rtp;
    /* INT shim/report headers go here (WITH_INT). */
}

/* Egress re-parses up to the fixed IPv4 header: the length check needs
 * total_len; iRED and INT will add what they need. Everything after the
 * fixed IPv4 header (options included) is payload here. */
struct egress_headers_t {
    ethernet_h ethernet;
    vlan_tag_h vlan_tag;
    ipv4_h     ipv4;
}

#endif /* _P4RELAY_HEADERS_P4_ */
