/* p4relay — SIP media relay offload for Tofino 1 (TNA) and Tofino 2 (T2NA),
 * bf-p4c.
 *
 * Build: switch/p4/build.sh [standard|lean|large|standard-t2] (README.md "Build").
 * Control-plane names follow switch/contract.toml; the contract test
 * (switch/client/tests/test_contract_p4.py) checks the compiler's bf-rt.json
 * against it.
 */
#include <core.p4>
/* bf-p4c defines __TARGET_TOFINO__ as the target's generation
 * (--target tofino: 1, tofino2: 2). */
#if __TARGET_TOFINO__ == 2
#include <t2na.p4>
#else
#include <tna.p4>
#endif

#include "include/profiles.p4"
#include "include/sizes.p4"
#include "include/defines.p4"
#include "include/int_headers.p4"
#include "include/headers.p4"
#include "include/metadata.p4"

#include "parsers/ingress_parser.p4"
#include "controls/rtp_clock.p4"
#ifdef WITH_IRED
#include "controls/ired.p4"
#endif
#include "controls/relay_sessions.p4"
#ifdef WITH_IPV6
#include "controls/relay6_sessions.p4"
#endif
#include "controls/learn_filter.p4"
#ifdef WITH_REROUTE
#include "controls/reroute.p4"
#endif
#include "controls/forwarding.p4"
#ifdef WITH_INT
#include "controls/int_source.p4"
#endif
#include "controls/ingress.p4"
#include "deparsers/ingress_deparser.p4"

#include "parsers/egress_parser.p4"
#ifdef WITH_RTP_QUALITY
#include "controls/rtp_quality.p4"
#endif
#ifdef WITH_INT
#include "controls/int_transit.p4"
#include "controls/int_sink.p4"
#endif
#include "controls/egress.p4"
#include "deparsers/egress_deparser.p4"

Pipeline(IngressParser(),
         Ingress(),
         IngressDeparser(),
         EgressParser(),
         Egress(),
         EgressDeparser()) pipe;

Switch(pipe) main;
