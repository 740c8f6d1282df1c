/* p4relay — table and register sizes: build-time knobs.
 *
 * Every value can be overridden on the command line (-DRELAY_TABLE_SIZE=...).
 * The session sizes differ per profile (below; README.md "Resources" explains
 * the numbers). The defaults (standard profile) match switch/contract.toml
 * (size_p4 / relay_entries_p4 / legs_p4).
 */
#ifndef _P4RELAY_SIZES_P4_
#define _P4RELAY_SIZES_P4_

/* Session sizes per profile: the largest the compiler places in 12 stages
 * (README "Resources", from the compiler's logs). Counting is per leg
 * (leg_rewrite's direct counter, guard_drops), so the relay tables carry no
 * counter RAM. A call = 4 relay + 4 guard entries + 2 legs.
 *   standard (every feature: RTP quality, reroute, INT, iRED): 128K / 128K /
 *       64K, 32,768 calls per pipe
 *   lean (relay only, P4RELAY_PROFILE_LEAN): 216K / 216K / 108K, 55,296 calls
 *   large (P4RELAY_SCALE_LARGE: RTP quality only): 184K / 184K / 92K,
 *       47,104 calls
 *   standard-v6 (P4RELAY_SCALE_V6, Tofino 1 with IPv6): 96K / 96K / 48K,
 *       24,576 calls of which up to 4,096 IPv6: the IPv6 session tables
 *       take the rest of the early stages; 12K IPv4 routes, so ipv4_lpm
 *       fits one stage (docs/design/ipv6.md "Tofino 1")
 * Tofino 2 (20 stages):
 *   large-t2 (P4RELAY_SCALE_T2: every feature): 256K / 256K / 128K, 65,536
 *       calls per pipe; each quality register in two (64K + 64K legs),
 *       leg_rewrite's counter cells 32 bits wide (LEG_COUNTER_WIDTH) */
#ifdef P4RELAY_SCALE_T2
#ifndef RELAY_TABLE_SIZE
#define RELAY_TABLE_SIZE 262144
#endif
#ifndef LEG_TABLE_SIZE
#define LEG_TABLE_SIZE 131072
#endif
#ifndef RELAY_GUARD_TABLE_SIZE
#define RELAY_GUARD_TABLE_SIZE 262144
#endif
#ifndef LEG_COUNTER_WIDTH
#define LEG_COUNTER_WIDTH 32
#endif
#endif
#ifdef P4RELAY_SCALE_V6
#ifndef RELAY_TABLE_SIZE
#define RELAY_TABLE_SIZE 98304
#endif
#ifndef LEG_TABLE_SIZE
#define LEG_TABLE_SIZE 49152
#endif
#ifndef RELAY_GUARD_TABLE_SIZE
#define RELAY_GUARD_TABLE_SIZE 98304
#endif
#ifndef IPV4_LPM_TABLE_SIZE
#define IPV4_LPM_TABLE_SIZE 12288
#endif
#endif
#ifdef P4RELAY_SCALE_LARGE
#ifndef RELAY_TABLE_SIZE
#define RELAY_TABLE_SIZE 188416
#endif
#ifndef LEG_TABLE_SIZE
#define LEG_TABLE_SIZE 94208
#endif
#ifndef RELAY_GUARD_TABLE_SIZE
#define RELAY_GUARD_TABLE_SIZE 188416
#endif
#endif
#ifdef P4RELAY_PROFILE_LEAN
#ifndef RELAY_TABLE_SIZE
#define RELAY_TABLE_SIZE 221184
#endif
#ifndef LEG_TABLE_SIZE
#define LEG_TABLE_SIZE 110592
#endif
#ifndef RELAY_GUARD_TABLE_SIZE
#define RELAY_GUARD_TABLE_SIZE 221184
#endif
#endif

/* Relay entries per pipe: 4 per call (RTP + RTCP, both directions). */
#ifndef RELAY_TABLE_SIZE
#define RELAY_TABLE_SIZE 131072
#endif
/* Guarded relay-side ports per pipe: 4 per call (each leg's RTPProxy RTP and
 * RTCP port), in every pipe whose ports can receive foreign traffic. */
#ifndef RELAY_GUARD_TABLE_SIZE
#define RELAY_GUARD_TABLE_SIZE 131072
#endif
/* Legs (one per session direction) per pipe: leg_rewrite and the quality registers. */
#ifndef LEG_TABLE_SIZE
#define LEG_TABLE_SIZE 65536
#endif
/* Hardware width of leg_rewrite's direct counter (packets and bytes per leg).
 * 64: one cell per 128-bit RAM word (64-bit packets and bytes). 32: two cells
 * per word (28-bit packets, 36-bit bytes), which the driver's counter sweep
 * (LR(t), its interval computed by the compiler) adds into 64-bit counters
 * before they wrap: bf-rt.json's counter fields stay 64 bits either way, and
 * the counter takes half the RAM. With one cell per word the counter's RAMs
 * leave leg_rewrite at most 17K entries per stage (the compiler's switchbox
 * allocation), so 128K legs would take 8 stages after relay's; with two, 4
 * (docs/design/p4-stages-and-capacity.md "Tofino 2"). */
#ifndef LEG_COUNTER_WIDTH
#define LEG_COUNTER_WIDTH 64
#endif
/* Per-leg quality registers (controls/rtp_quality.p4): one register of
 * LEG_TABLE_SIZE cells indexed by the leg, or with QUALITY_SPLIT (profiles.p4)
 * two, indexed by the leg's low QUALITY_HALF_BITS bits, the next bit choosing:
 * the lower half 2^QUALITY_HALF_BITS cells, the upper ("_hi") the rest of
 * LEG_TABLE_SIZE. */
#ifdef QUALITY_SPLIT
#ifndef QUALITY_HALF_BITS
#define QUALITY_HALF_BITS 16
#endif
#if LEG_TABLE_SIZE > (2 << QUALITY_HALF_BITS) || LEG_TABLE_SIZE <= (1 << QUALITY_HALF_BITS)
#error "QUALITY_SPLIT: LEG_TABLE_SIZE must be above 1 << QUALITY_HALF_BITS and at most 2 << QUALITY_HALF_BITS"
#endif
#define QUALITY_CELLS (1 << QUALITY_HALF_BITS)
#define QUALITY_HI_CELLS (LEG_TABLE_SIZE - QUALITY_CELLS)
#else
#define QUALITY_CELLS LEG_TABLE_SIZE
#endif
/* IPv6 relay sessions per pipe (relay6: 4 per call, relay_guard6: 4 per
 * call, leg_rewrite6: 2 per call). Their legs come out of the same
 * LEG_TABLE_SIZE index space as IPv4's (the quality registers). */
#ifndef RELAY6_TABLE_SIZE
#define RELAY6_TABLE_SIZE 16384
#endif
#ifndef RELAY_GUARD6_TABLE_SIZE
#define RELAY_GUARD6_TABLE_SIZE 16384
#endif
#ifndef LEG6_TABLE_SIZE
#define LEG6_TABLE_SIZE 8192
#endif
#ifndef RELAY6_ADDR_TABLE_SIZE
#define RELAY6_ADDR_TABLE_SIZE 64
#endif
#ifndef IPV6_LPM_TABLE_SIZE
#define IPV6_LPM_TABLE_SIZE 2048
#endif
#ifndef IPV4_LPM_TABLE_SIZE
#define IPV4_LPM_TABLE_SIZE 16384
#endif
#ifndef NEXTHOP_TABLE_SIZE
#define NEXTHOP_TABLE_SIZE 4096
#endif
#ifndef RELAY_ADDR_TABLE_SIZE
#define RELAY_ADDR_TABLE_SIZE 64
#endif
/* Slots of the digest-suppression register; LEARN_FILTER_INDEX_BITS = log2. */
#ifndef LEARN_FILTER_SIZE
#define LEARN_FILTER_SIZE 4096
#endif
#ifndef LEARN_FILTER_INDEX_BITS
#define LEARN_FILTER_INDEX_BITS 12
#endif
/* Congestion reroute: watched destinations (reroute_watch entries), their
 * state slots (reroute_active, reroute_run; REROUTE_SLOT_BITS = log2), the
 * per-port register (every dev_port of a 4-pipe part) and the flow classes. */
#ifndef REROUTE_WATCH_TABLE_SIZE
#define REROUTE_WATCH_TABLE_SIZE 4096
#endif
/* IPv6 destinations (reroute_watch6, WITH_IPV6): the same slots and classes;
 * a few hundred media prefixes, not per-host entries. */
#ifndef REROUTE_WATCH6_TABLE_SIZE
#define REROUTE_WATCH6_TABLE_SIZE 512
#endif
#ifndef REROUTE_SLOTS
#define REROUTE_SLOTS 4096
#endif
#ifndef REROUTE_SLOT_BITS
#define REROUTE_SLOT_BITS 12
#endif
#define REROUTE_PORTS 512
#define REROUTE_CLASSES 256

/* INT watch list (ternary) and per-port roles. */
#ifndef INT_WATCH_TABLE_SIZE
#define INT_WATCH_TABLE_SIZE 256
#endif
/* IPv6 destinations traced (int_watch6, WITH_IPV6): media prefixes */
#ifndef INT_WATCH6_TABLE_SIZE
#define INT_WATCH6_TABLE_SIZE 512
#endif
#ifndef INT_PORT_TABLE_SIZE
#define INT_PORT_TABLE_SIZE 512
#endif

/* iRED's signalling classes (ired_spare: DSCP and UDP ports, ternary) */
#ifndef IRED_SPARE_TABLE_SIZE
#define IRED_SPARE_TABLE_SIZE 16
#endif

#endif /* _P4RELAY_SIZES_P4_ */
