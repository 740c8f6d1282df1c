/* p4relay — compile-time profiles.
 *
 * Pick one with -DP4RELAY_PROFILE_<NAME> on the bf-p4c command line (README).
 *   P4RELAY_PROFILE_STANDARD (default): every feature. Forwarding, relay,
 *       relay guard, learning digest; per-leg RTP quality in Egress incl.
 *       exact RFC 3550 jitter (one egress-to-egress write-back copy per RTP
 *       packet of an offloaded leg, dropped after its egress pass);
 *       congestion reroute (controls/reroute.p4); in-band network telemetry
 *       (INT-MD over UDP source, transit and sink, telemetry report copies,
 *       controls/int_*.p4); iRED (controls/ired.p4: drop decisions in
 *       Egress, drops in Ingress).
 *       IPv6 forwarding and relay (WITH_IPV6: Tofino 2, or -DP4RELAY_IPV6).
 *       -DP4RELAY_NO_REROUTE, -DP4RELAY_NO_INT, -DP4RELAY_NO_IRED,
 *       -DP4RELAY_NO_IPV6 leave one out.
 *   P4RELAY_PROFILE_LEAN: forwarding, relay, relay guard, learning digest
 *       only, IPv4 only. No quality registers, no write-back copies, no
 *       reroute, INT, iRED or IPv6: the most sessions per pipe. The contract's feature objects are
 *       then absent from bfrt.json; the bridged header stays (4 bytes inside
 *       the switch).
 * P4RELAY_SCALE_LARGE (sizes.p4) sizes the standard profile up, with RTP
 * quality only (its relay tables take every ingress stage).
 * P4RELAY_SCALE_T2 (Tofino 2 only, sizes.p4) sizes the standard profile up
 * with every feature, each per-leg quality register split in two
 * (QUALITY_SPLIT, controls/rtp_quality.p4). switch/p4/build.sh
 * names the combinations the p4 test stage compiles (standard, lean, large,
 * standard-t2, large-t2).
 */
#ifndef _P4RELAY_PROFILES_P4_
#define _P4RELAY_PROFILES_P4_

#if !defined(P4RELAY_PROFILE_LEAN) && !defined(P4RELAY_PROFILE_STANDARD)
#define P4RELAY_PROFILE_STANDARD
#endif

#if defined(P4RELAY_PROFILE_LEAN) && defined(P4RELAY_PROFILE_STANDARD)
#error "choose one profile: P4RELAY_PROFILE_LEAN or P4RELAY_PROFILE_STANDARD"
#endif

#if defined(P4RELAY_SCALE_V6) && (__TARGET_TOFINO__ != 1 || !defined(P4RELAY_PROFILE_STANDARD) || defined(P4RELAY_SCALE_LARGE) || !defined(P4RELAY_IPV6))
#error "P4RELAY_SCALE_V6 is the standard profile with -DP4RELAY_IPV6 on Tofino 1, not with LEAN or SCALE_LARGE"
#endif

#if defined(P4RELAY_SCALE_T2) && (__TARGET_TOFINO__ != 2 || !defined(P4RELAY_PROFILE_STANDARD) || defined(P4RELAY_SCALE_LARGE))
#error "P4RELAY_SCALE_T2 is the standard profile on Tofino 2 (--target tofino2), not with LEAN or SCALE_LARGE"
#endif

#ifdef P4RELAY_PROFILE_STANDARD
#define WITH_RTP_QUALITY
/* The features beside RTP quality. Not with P4RELAY_SCALE_LARGE, whose relay
 * tables take all 12 ingress stages. Reroute sends its notices through the
 * egress mirror RTP quality already uses; INT's egress parses UDP with
 * RtpQuality's parser states. */
#ifndef P4RELAY_SCALE_LARGE
#ifndef P4RELAY_NO_REROUTE
#define WITH_REROUTE
#endif
#ifndef P4RELAY_NO_INT
#define WITH_INT
#endif
#ifndef P4RELAY_NO_IRED
#define WITH_IRED
#endif
/* IPv6 forwarding and relay (controls/relay6_sessions.p4): Tofino 2's
 * standard build; on Tofino 1 only with -DP4RELAY_IPV6, since with the IPv4
 * tables at their standard sizes it does not place in 12 stages
 * (docs/design/ipv6.md "Capacity"). */
#if (__TARGET_TOFINO__ == 2 || defined(P4RELAY_IPV6)) && !defined(P4RELAY_NO_IPV6)
#define WITH_IPV6
#endif
#endif
#endif

/* Tofino 1 with IPv6 (standard-v6): both families' session tables pinned to
 * the stages that keep the IPv6 chain beside the IPv4 one, the IPv6 ones
 * told to ignore the IPv4 ones' writes (IGNORE_T1_IPV6), the egress length
 * check one table (L3_END_TABLE, egress.p4) (relay 0, relay6_addr 1,
 * relay6 and relay_guard6 2, leg_rewrite6 and ired_spare 3, ipv6_lpm 5:
 * docs/design/ipv6.md "Tofino 1"). A pin is the earliest stage
 * the compiler tries; left to itself it fills stage 0 with one-step tables
 * and the early stages' SRAM with the IPv4 tables, and places the IPv6
 * ones after them. */
#if __TARGET_TOFINO__ == 1 && defined(WITH_IPV6)
#define STAGE_T1_IPV6(n) @stage(n)
#define IGNORE_T1_IPV6(t) @ignore_table_dependency(t)
#define PRIO_T1_IPV6 @placement_priority(10)
#define L3_END_TABLE
#else
#define STAGE_T1_IPV6(n)
#define IGNORE_T1_IPV6(t)
#define PRIO_T1_IPV6
#endif

/* EARLY_STEP(step, statement): the statement (one RegisterAction call) as
 * a hidden keyless table
 * `step`, applied as step.apply(). Tofino 1 with IPv6 gives it placement
 * priority (PRIO_T1_IPV6): the compiler then places it in the first stage
 * its inputs allow, where stateful ALUs are free, instead of the last stage
 * its slack allows, whose four stateful ALUs (both gresses) and 16 logical
 * tables the steps that cannot move earlier need (docs/design/ipv6.md
 * "Tofino 1"). Elsewhere it is the table the compiler makes of the
 * statement itself. */
#define EARLY_STEP(step, statement) \
    action step##_run() { \
        statement; \
    } \
    @hidden PRIO_T1_IPV6 \
    table step { \
        actions = { step##_run; } \
        const default_action = step##_run(); \
        size = 1; \
    }

/* A quality register of more than 64K legs fits no stage beside the ingress
 * tables that many legs need, nor does Tofino 1's loss register (two 32-bit
 * fields) of the large profile's 92K legs: two registers, the leg's bit
 * QUALITY_HALF_BITS choosing (sizes.p4). */
#if defined(P4RELAY_SCALE_T2) || defined(P4RELAY_SCALE_LARGE)
#define QUALITY_SPLIT
#endif

/* The per-packet queueing delay (egress_metadata_t.queue_delay_ns, the
 * traffic manager's deq_timedelta): what reroute detection compares with t_q
 * and the INT hop reports as its hop latency. */
#if defined(WITH_REROUTE) || defined(WITH_INT)
#define WITH_QUEUE_DELAY
#endif

#endif /* _P4RELAY_PROFILES_P4_ */
