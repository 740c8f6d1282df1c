/* p4relay — compile-time profiles.
 *
 * Pick one with -DP4RELAY_PROFILE_<NAME> on the bf-p4c command line (README).
 *   P4RELAY_PROFILE_STANDARD (default): forwarding, relay, relay guard,
 *       learning digest, per-leg RTP quality in Egress incl. exact RFC 3550
 *       jitter (one egress-to-egress write-back copy per RTP packet of an
 *       offloaded leg, dropped after its egress pass).
 *   P4RELAY_WITH_INT (with the standard profile; build.sh profile "int"):
 *       in-band network telemetry, WITH_INT: INT-MD over UDP source, transit
 *       and sink, telemetry report copies (controls/int_*.p4).
 *   P4RELAY_PROFILE_LEAN: forwarding, relay, relay guard, learning digest
 *       only. No quality registers, no write-back copies: the most sessions
 *       per pipe. The quality registers of the contract are then absent from
 *       bfrt.json; the bridged header stays (4 bytes inside the switch).
 *   P4RELAY_IRED (the "ired" profile of build.sh: LEAN + iRED): iRED, drop
 *       decisions in Egress, drops in Ingress.
 * P4RELAY_SCALE_LARGE (sizes.p4) sizes either profile up; switch/p4/build.sh
 * names the combinations the p4 test stage compiles (standard, lean, large,
 * ired).
 */
#ifndef _P4RELAY_PROFILES_P4_
#define _P4RELAY_PROFILES_P4_

#if !defined(P4RELAY_PROFILE_LEAN) && !defined(P4RELAY_PROFILE_STANDARD)
#define P4RELAY_PROFILE_STANDARD
#endif

#if defined(P4RELAY_PROFILE_LEAN) && defined(P4RELAY_PROFILE_STANDARD)
#error "choose one profile: P4RELAY_PROFILE_LEAN or P4RELAY_PROFILE_STANDARD"
#endif

#ifdef P4RELAY_PROFILE_STANDARD
#define WITH_RTP_QUALITY
/* Congestion reroute (controls/reroute.p4): on in the standard profile. Not
 * with P4RELAY_SCALE_LARGE, whose session tables take the stages it needs,
 * and off with -DP4RELAY_NO_REROUTE. It sends its notices through the egress
 * mirror the RTP quality step already uses, so it needs WITH_RTP_QUALITY. */
#if !defined(P4RELAY_SCALE_LARGE) && !defined(P4RELAY_NO_REROUTE)
#define WITH_REROUTE
#endif
/* In-band network telemetry (controls/int_*.p4): with P4RELAY_WITH_INT
 * (build.sh profile "int", which also sets P4RELAY_NO_REROUTE: both do not
 * fit the 12 stages together). */
#ifdef P4RELAY_WITH_INT
#define WITH_INT
#endif
#endif

#if defined(P4RELAY_WITH_INT) && !defined(WITH_INT)
#error "INT needs the standard profile (its egress parses UDP with RtpQuality's parser)"
#endif
#if defined(WITH_INT) && defined(WITH_REROUTE)
#error "INT and reroute do not fit 12 stages together: add -DP4RELAY_NO_REROUTE"
#endif

/* The per-packet queueing delay (egress_metadata_t.queue_delay_ns, the
 * traffic manager's deq_timedelta): what reroute detection compares with t_q
 * and the INT hop reports as its hop latency. */
#if defined(WITH_REROUTE) || defined(WITH_INT)
#define WITH_QUEUE_DELAY
#endif

/* P4RELAY_IRED: iRED ingress-drop AQM (controls/ired.p4). Built by the
 * "ired" profile (LEAN + P4RELAY_IRED, build.sh); with the standard
 * profile's RTP quality the two egress chains need 16 stages (README
 * "iRED"). Its two ingress stages follow nexthop (the large build has none
 * left). */
#if defined(P4RELAY_IRED) && defined(P4RELAY_SCALE_LARGE)
#error "P4RELAY_IRED does not fit the large build"
#endif
#ifdef P4RELAY_IRED
#define WITH_IRED
#endif

#endif /* _P4RELAY_PROFILES_P4_ */
