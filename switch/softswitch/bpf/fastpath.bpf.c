// SPDX-License-Identifier: GPL-2.0
//
// p4relay softswitch XDP fast path: relay hits of the pipeline, in the kernel.
//
// The same pipeline as src/pipeline/, for the one case that is all of a
// call's media: a clean IPv4/UDP packet that hits `relay`, whose leg has a
// `leg_rewrite` and whose routed egress port is enabled and unshaped, or its
// IPv6 twin (`relay6`, `leg_rewrite6`: no extension header, a non-zero UDP
// checksum, updated incrementally and never sent as 0). Such a
// packet is rewritten, counted and its RTP quality measured here, then
// redirected to the egress port, without a copy into user space, a wake-up or
// a send() (the costs that make a user-space relay several times the kernel
// bridge). Everything else (misses, learn digests, guards, VLAN, IPv4
// options, fragments, bad checksums, TTL expiry, shaped or disabled ports,
// legs without a rewrite) goes to the user-space pipeline, which defines the
// behaviour; this program only ever does what that would do. Such a packet is
// redirected to the port's AF_XDP socket for its RX queue (`xsks`, filled by
// the softswitch when it runs on AF_XDP), or, without one, passed up the stack
// to the AF_PACKET rings (XDP_PASS). With the fast path off the relay map is
// empty and the program only hands packets to the sockets.
//
// Shared state, so counters and registers are one truth whichever path a
// packet takes: the quality registers are this program's `quality` array,
// mmapped by the softswitch as its register storage; leg counters
// (leg_rewrite's direct counter), port counters and pipeline counters here
// are added to the softswitch's own on every read. Map layouts: bpf/abi.toml.

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

// UNBOUND_PORT, MAX_PORTS, XSK_QUEUES and the map keys and values, generated
// by build.rs from bpf/abi.toml and switch/contract.toml (the softswitch's
// src/xdp_abi.rs is the same definition in Rust).
#include "xdp_abi.h"

#define NS_PER_S 1000000000ULL
#define NS_PER_MS 1000000ULL

// Sizes are set by the loader before load (bpf_map__set_max_entries).
#define MAP(name, kind, n, key_t, val_t)                                                           \
    struct {                                                                                       \
        __uint(type, kind);                                                                        \
        __uint(max_entries, n);                                                                    \
        __type(key, key_t);                                                                        \
        __type(value, val_t);                                                                      \
    } name SEC(".maps")
#define ARRAY(name, n, val_t) MAP(name, BPF_MAP_TYPE_ARRAY, n, __u32, val_t)

MAP(relay, BPF_MAP_TYPE_HASH, 65536, struct relay_key, struct relay_val);

// By leg, as leg_counts and quality: a leg with a rewrite and a plain route
// has `valid` set. An array, not a hash: the leg is the index, so a relay hit
// costs one memory access here instead of a bucket and a chained element,
// which at hundreds of thousands of legs are two cache misses per packet.
ARRAY(legs, 32768, struct leg_val);
ARRAY(leg_counts, 32768, struct leg_count);

// IPv6: relay6 keyed on the relay's own address (the softswitch resolves
// relay6_addr's relay_id to it when it mirrors an entry), so a hit is one
// lookup as in IPv4. leg_rewrite6 holds far fewer entries than there are
// legs, so legs6 is an array of cells as many as it holds, not one per leg:
// the softswitch gives a leg a cell while it has an IPv6 rewrite or a relay6
// entry, and the relay6 value carries it (`slot`), so the rewrite is an
// index as in IPv4, not a second hash lookup. Counters and quality are the
// shared arrays, by leg.
MAP(relay6, BPF_MAP_TYPE_HASH, 65536, struct relay6_key, struct relay_val);
ARRAY(legs6, 4096, struct leg6_val);

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, 32768);
    __uint(map_flags, BPF_F_MMAPABLE);
    __type(key, __u32);
    __type(value, struct quality);
} quality SEC(".maps");

ARRAY(ports, MAX_PORTS, struct port_val);
// ifindex -> dev port
MAP(ifports, BPF_MAP_TYPE_HASH, MAX_PORTS, __u32, __u32);
ARRAY(config, 1, struct config);
// The user-space pipeline's AF_XDP sockets: index port * XSK_QUEUES + RX queue.
MAP(xsks, BPF_MAP_TYPE_XSKMAP, MAX_PORTS * XSK_QUEUES, __u32, __u32);

// A packet for the user-space pipeline: its port's socket for this RX queue,
// or up the stack (AF_PACKET) where there is none.
static __always_inline int to_user(struct xdp_md *ctx, __u32 port)
{
    __u32 q = ctx->rx_queue_index;
    if (port >= MAX_PORTS || q >= XSK_QUEUES)
        return XDP_PASS;
    return bpf_redirect_map(&xsks, port * XSK_QUEUES + q, XDP_PASS);
}

// RFC 1624: HC' = ~(~HC + ~m + m'), as packet.rs csum_update16.
static __always_inline __u16 csum_update16(__u16 hc, __u16 old, __u16 new)
{
    __u32 s = (__u16)~hc + (__u32)(__u16)~old + new;
    s = (s & 0xffff) + (s >> 16);
    s = (s & 0xffff) + (s >> 16);
    return ~s;
}

static __always_inline __u16 csum_update32(__u16 hc, __u32 old, __u32 new)
{
    hc = csum_update16(hc, old >> 16, new >> 16);
    return csum_update16(hc, old & 0xffff, new & 0xffff);
}

static __always_inline __u32 ip_sum(const __u16 *w)
{
    __u32 s = 0;
#pragma unroll
    for (int i = 0; i < 10; i++)
        s += w[i];
    s = (s & 0xffff) + (s >> 16);
    s = (s & 0xffff) + (s >> 16);
    return s;
}

// src/pipeline/rtp_quality.rs QualityRegs::update, statement for statement.
static __always_inline void quality_update(struct quality *q, __u8 pt, __u16 seq, __u32 ts,
                                           __u64 now_ns, const struct config *c)
{
    // now_ns * hz / 1e9 without a 128-bit product; equal mod 2^32.
    __u64 hz = c->clock_hz;
    __u32 arrival = (__u32)((now_ns / NS_PER_S) * hz + ((now_ns % NS_PER_S) * hz) / NS_PER_S);
    __u32 transit = arrival - ts;
    __u32 n = __sync_fetch_and_add(&q->packets, 1);
    if (n == 0) {
        q->max_seq = seq;
        q->jitter = 0;
    } else {
        __s16 delta = (__s16)(__u16)(seq - q->max_seq);
        if (delta > 0) {
            if (delta > 1)
                __sync_fetch_and_add(&q->lost, (__u32)(delta - 1));
            q->max_seq = seq;
        } else if (delta < 0) {
            __sync_fetch_and_add(&q->reordered, 1);
        }
        __s32 d = (__s32)(transit - q->transit);
        __u32 ad = d < 0 ? (__u32)0 - (__u32)d : (__u32)d;
        __u32 s = q->jitter;
        q->jitter = s + ad - (s >> (c->jitter_shift & 31));
    }
    q->transit = transit;
    q->last_seen = (__u32)(now_ns / NS_PER_MS);
    q->payload_type = pt;
}

// The RTP header of a relayed datagram whose payload starts at `h` and is
// `len` bytes (RTCP is never measured): 1 if it is RTP version 2.
static __always_inline int rtp_of(__u8 *h, void *end, __u32 len, __u8 *pt, __u16 *seq, __u32 *ts)
{
    if (len < 12 || (void *)(h + 12) > end || (h[0] >> 6) != 2)
        return 0;
    *pt = h[1] & 0x7f;
    *seq = ((__u16)h[2] << 8) | h[3];
    *ts = ((__u32)h[4] << 24) | ((__u32)h[5] << 16) | ((__u32)h[6] << 8) | h[7];
    return 1;
}

// A whole copy of a cell the softswitch rewrites in place (src/fastpath/mod.rs
// mirror_leg, mirror_leg6): `valid` is cleared first and set to a new
// generation last, so a copy taken between two equal non-zero reads of it is
// whole. 1 if `*out` is such a copy.
#define CELL_COPY(cell, out)                                                                       \
    ({                                                                                             \
        __u32 gen_ = *(volatile __u32 *)&(cell)->valid;                                            \
        int ok_ = 0;                                                                               \
        if (gen_) {                                                                                \
            asm volatile("" ::: "memory");                                                         \
            *(out) = *(cell);                                                                      \
            asm volatile("" ::: "memory");                                                         \
            ok_ = *(volatile __u32 *)&(cell)->valid == gen_;                                       \
        }                                                                                          \
        ok_;                                                                                       \
    })

// What a relay hit updates besides its cell: the egress port (enabled for the
// fast path), the pipeline's counters and the leg's counter. 0 if all exist.
struct hit {
    struct port_val *pout;
    struct config *cfg;
    struct leg_count *lc;
};

static __always_inline int hit_state(__u32 leg, __u32 eport, struct hit *h)
{
    __u32 zero = 0;
    h->pout = bpf_map_lookup_elem(&ports, &eport);
    if (!h->pout || !h->pout->fast)
        return -1;
    h->cfg = bpf_map_lookup_elem(&config, &zero);
    if (!h->cfg)
        return -1;
    h->lc = bpf_map_lookup_elem(&leg_counts, &leg);
    return h->lc ? 0 : -1;
}

// A relay hit rewritten: the leg's and ports' counters, the pipeline's, the
// entry's last hit and the leg's quality, then out of the egress port.
static __always_inline int relayed(struct relay_val *rv, __u32 leg, struct hit *h,
                                   struct port_val *pin, __u64 now_ns, __u32 frame_len, int rtp,
                                   __u8 pt, __u16 seq, __u32 ts)
{
    struct leg_count *lc = h->lc;
    struct port_val *pout = h->pout;
    struct config *cfg = h->cfg;
    __sync_fetch_and_add(&lc->pkts, 1);
    __sync_fetch_and_add(&lc->bytes, frame_len);
    rv->last_hit_ms = (__u32)(now_ns / NS_PER_MS);
    __sync_fetch_and_add(&pin->rx_packets, 1);
    __sync_fetch_and_add(&pin->rx_bytes, frame_len);
    __sync_fetch_and_add(&pout->tx_packets, 1);
    __sync_fetch_and_add(&pout->tx_bytes, frame_len);
    __sync_fetch_and_add(&cfg->relay_hits, 1);
    __sync_fetch_and_add(&cfg->relay_rewrites, 1);
    if (rtp) {
        // No queue on this path: the packet departs now (egress quality).
        struct quality *q = bpf_map_lookup_elem(&quality, &leg);
        if (q) {
            quality_update(q, pt, seq, ts, now_ns, cfg);
            __sync_fetch_and_add(&cfg->rtp_packets, 1);
        }
    }
    return bpf_redirect(pout->ifindex, 0);
}

static __always_inline int relay_v4(struct xdp_md *ctx, __u32 port)
{
    void *data = (void *)(long)ctx->data;
    void *end = (void *)(long)ctx->data_end;
    struct ethhdr *eth = data;
    struct iphdr *ip = (void *)(eth + 1);
    if ((void *)(ip + 1) > end)
        return to_user(ctx, port);
    // Options, fragments, TTL expiry, bad header: the user-space pipeline's cases.
    if (ip->version != 4 || ip->ihl != 5 || ip->protocol != IPPROTO_UDP || ip->ttl <= 1)
        return to_user(ctx, port);
    if (ip->frag_off & bpf_htons(0x3fff))
        return to_user(ctx, port);
    __u32 tot = bpf_ntohs(ip->tot_len);
    if (tot < 28 || (void *)ip + tot > end)
        return to_user(ctx, port);
    if (ip_sum((const __u16 *)ip) != 0xffff)
        return to_user(ctx, port);
    struct udphdr *udp = (void *)(ip + 1);
    if ((void *)(udp + 1) > end)
        return to_user(ctx, port);
    __u32 ulen = bpf_ntohs(udp->len);
    if (ulen < 8 || ulen > tot - 20)
        return to_user(ctx, port);

    struct port_val *pin = bpf_map_lookup_elem(&ports, &port);
    if (!pin || !pin->enabled)
        return to_user(ctx, port);

    struct relay_key k = {
        .src = bpf_ntohl(ip->saddr),
        .dst = bpf_ntohl(ip->daddr),
        .sport = bpf_ntohs(udp->source),
        .dport = bpf_ntohs(udp->dest),
        .port = pin->unbound ? UNBOUND_PORT : port,
    };
    struct relay_val *rv = bpf_map_lookup_elem(&relay, &k);
    if (!rv)
        return to_user(ctx, port);
    __u32 leg = rv->leg;
    __u32 rtcp = rv->rtcp;
    struct leg_val *cell = bpf_map_lookup_elem(&legs, &leg);
    struct leg_val l;
    if (!cell || !CELL_COPY(cell, &l))
        return to_user(ctx, port);
    struct leg_val *lv = &l;
    struct hit h;
    if (hit_state(leg, lv->port, &h))
        return to_user(ctx, port);

    // Committed: from here the packet is relayed by this program.
    __u64 now_ns = bpf_ktime_get_ns() + h.cfg->wall_offset_ns;
    __u32 frame_len = (__u32)(end - data);
    __u16 inc = rtcp ? 1 : 0;
    __u16 sport = lv->sport + inc, dport = lv->dport + inc;
    __u32 nsrc = lv->src, ndst = lv->dst;

    int rtp = 0;
    __u8 pt = 0;
    __u16 seq = 0;
    __u32 ts = 0;
    if (!rtcp)
        rtp = rtp_of((void *)(udp + 1), end, tot - 28, &pt, &seq, &ts);

    __u16 c = bpf_ntohs(udp->check);
    if (c != 0) {
        c = csum_update32(c, k.src, nsrc);
        c = csum_update32(c, k.dst, ndst);
        c = csum_update16(c, k.sport, sport);
        c = csum_update16(c, k.dport, dport);
        udp->check = bpf_htons(c == 0 ? 0xffff : c);
    }
    ip->saddr = bpf_htonl(nsrc);
    ip->daddr = bpf_htonl(ndst);
    udp->source = bpf_htons(sport);
    udp->dest = bpf_htons(dport);
    __builtin_memcpy(eth->h_dest, lv->dmac, 6);
    __builtin_memcpy(eth->h_source, lv->smac, 6);
    ip->ttl--;
    ip->check = 0;
    ip->check = ~ip_sum((const __u16 *)ip);
    return relayed(rv, leg, &h, pin, now_ns, frame_len, rtp, pt, seq, ts);
}

// The IPv6 twin (src/pipeline/relay6_sessions.rs, ingress6): UDP right after
// the fixed header with a non-zero checksum, relay6 on the 5-tuple,
// leg_rewrite6 with its route, hop limit - 1, no L3 checksum.
static __always_inline int relay_v6(struct xdp_md *ctx, __u32 port)
{
    void *data = (void *)(long)ctx->data;
    void *end = (void *)(long)ctx->data_end;
    struct ethhdr *eth = data;
    struct ipv6hdr *ip6 = (void *)(eth + 1);
    if ((void *)(ip6 + 1) > end)
        return to_user(ctx, port);
    // Extension headers (fragments among them), ICMPv6, hop limit expiry:
    // the user-space pipeline's cases.
    if (ip6->version != 6 || ip6->nexthdr != IPPROTO_UDP || ip6->hop_limit <= 1)
        return to_user(ctx, port);
    __u32 plen = bpf_ntohs(ip6->payload_len);
    if (plen < 8 || (void *)(ip6 + 1) + plen > end)
        return to_user(ctx, port);
    struct udphdr *udp = (void *)(ip6 + 1);
    if ((void *)(udp + 1) > end)
        return to_user(ctx, port);
    __u32 ulen = bpf_ntohs(udp->len);
    if (ulen < 8 || ulen > plen)
        return to_user(ctx, port);
    // A zero checksum is invalid over IPv6: such a datagram is never relayed.
    if (udp->check == 0)
        return to_user(ctx, port);

    struct port_val *pin = bpf_map_lookup_elem(&ports, &port);
    if (!pin || !pin->enabled)
        return to_user(ctx, port);

    struct relay6_key k = {
        .sport = bpf_ntohs(udp->source),
        .dport = bpf_ntohs(udp->dest),
        .port = pin->unbound ? UNBOUND_PORT : port,
    };
    __builtin_memcpy(k.src, &ip6->saddr, 16);
    __builtin_memcpy(k.dst, &ip6->daddr, 16);
    struct relay_val *rv = bpf_map_lookup_elem(&relay6, &k);
    if (!rv)
        return to_user(ctx, port);
    __u32 leg = rv->leg;
    __u32 rtcp = rv->rtcp;
    __u32 slot = rv->slot;
    struct leg6_val *cell = bpf_map_lookup_elem(&legs6, &slot);
    struct leg6_val l;
    // A cell that holds another leg (the entry outlived its leg's) never matches.
    if (!cell || !CELL_COPY(cell, &l) || l.leg != leg)
        return to_user(ctx, port);
    struct hit h;
    if (hit_state(leg, l.port, &h))
        return to_user(ctx, port);

    // Committed: from here the packet is relayed by this program.
    __u64 now_ns = bpf_ktime_get_ns() + h.cfg->wall_offset_ns;
    __u32 frame_len = (__u32)(end - data);
    __u16 inc = rtcp ? 1 : 0;
    __be16 sport = bpf_htons(l.sport + inc), dport = bpf_htons(l.dport + inc);

    int rtp = 0;
    __u8 pt = 0;
    __u16 seq = 0;
    __u32 ts = 0;
    if (!rtcp)
        rtp = rtp_of((void *)(udp + 1), end, plen - 8, &pt, &seq, &ts);

    // RFC 1624 over the 18 words that change (both addresses, both ports),
    // in network byte order as they lie; one's-complement sums do not mind.
    const __u16 *old = (const __u16 *)&ip6->saddr;
    const __u16 *new = (const __u16 *)l.src;
    __u32 s = (__u16)~udp->check;
#pragma unroll
    for (int i = 0; i < 16; i++)
        s += (__u32)(__u16)~old[i] + new[i];
    s += (__u32)(__u16)~udp->source + sport + (__u32)(__u16)~udp->dest + dport;
    s = (s & 0xffff) + (s >> 16);
    s = (s & 0xffff) + (s >> 16);
    __u16 c = ~s;
    udp->check = c == 0 ? 0xffff : c;
    __builtin_memcpy(&ip6->saddr, l.src, 16);
    __builtin_memcpy(&ip6->daddr, l.dst, 16);
    udp->source = sport;
    udp->dest = dport;
    __builtin_memcpy(eth->h_dest, l.dmac, 6);
    __builtin_memcpy(eth->h_source, l.smac, 6);
    ip6->hop_limit--;
    __sync_fetch_and_add(&h.cfg->relay6_rewrites, 1);
    return relayed(rv, leg, &h, pin, now_ns, frame_len, rtp, pt, seq, ts);
}

SEC("xdp")
int p4relay_fastpath(struct xdp_md *ctx)
{
    void *data = (void *)(long)ctx->data;
    void *end = (void *)(long)ctx->data_end;

    __u32 ifindex = ctx->ingress_ifindex;
    __u32 *in_port = bpf_map_lookup_elem(&ifports, &ifindex);
    if (!in_port)
        return XDP_PASS;
    __u32 port = *in_port;

    struct ethhdr *eth = data;
    if ((void *)(eth + 1) > end)
        return to_user(ctx, port);
    if (eth->h_proto == bpf_htons(ETH_P_IP))
        return relay_v4(ctx, port);
    if (eth->h_proto == bpf_htons(ETH_P_IPV6))
        return relay_v6(ctx, port);
    return to_user(ctx, port);
}

// The native-mode probe's target ifindex (one cell; src/fastpath/mod.rs
// native_tx_reaches).
ARRAY(probe_target, 1, __u32);

// In native mode a frame redirected into a veth is queued to its peer's NAPI;
// a peer without NAPI (GRO off and no XDP program of its own) makes the
// kernel drop it. The softswitch runs this program on one live frame
// (BPF_F_TEST_XDP_LIVE_FRAMES) to see whether a port's peer takes frames
// redirected the way p4relay_fastpath redirects them.
SEC("xdp")
int p4relay_probe(struct xdp_md *ctx)
{
    __u32 zero = 0;
    __u32 *ifindex = bpf_map_lookup_elem(&probe_target, &zero);
    return ifindex ? bpf_redirect(*ifindex, 0) : XDP_ABORTED;
}

char _license[] SEC("license") = "GPL";
