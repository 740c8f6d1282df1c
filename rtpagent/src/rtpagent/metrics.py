"""Prometheus metrics (served on /metrics, port 9102 by default)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

COMMANDS = Counter("rtpagent_commands_total", "Commands received from SIP servers", ["op"])
REPLIES = Counter("rtpagent_replies_total", "Replies sent back", ["result"])
REPLY_OK = REPLIES.labels("ok")
REPLY_ERROR = REPLIES.labels("error")
_COMMAND_CHILDREN: dict[str, Counter] = {}


def command_counter(op: str) -> Counter:
    """COMMANDS.labels(op), cached: label lookup costs more than the increment."""
    c = _COMMAND_CHILDREN.get(op)
    if c is None:
        c = _COMMAND_CHILDREN[op] = COMMANDS.labels(op)
    return c


BAD_INPUT = Counter("rtpagent_bad_input_total", "Malformed commands or replies", ["kind"])
UPSTREAM_TIMEOUTS = Counter("rtpagent_upstream_timeouts_total", "Commands RTPProxy never answered")
CONTROL_LATENCY = Histogram(
    "rtpagent_upstream_seconds",
    "RTPProxy round trip as seen by the agent",
    buckets=(0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0),
)
SESSIONS = Gauge("rtpagent_sessions", "Sessions known to the agent")
OFFLOADED = Gauge("rtpagent_offloaded_sessions", "Sessions whose media the switch carries")
OFFLOADS = Counter("rtpagent_offloads_total", "Sessions offloaded to the switch")
MODIFICATIONS = Counter("rtpagent_offload_modifications_total", "Offloaded sessions re-written")
FALLBACKS = Counter("rtpagent_fallbacks_total", "Sessions left on RTPProxy", ["reason"])
DIGESTS = Counter("rtpagent_learn_digests_total", "Learn digests received from the switch")
LEARN_REFUSED = Counter(
    "rtpagent_learn_refused_total",
    "Media sources the learning policy did not latch (RTP Bleed attempts, misrouted media)",
    ["reason"],
)
GUARD_FOREIGN = Counter(
    "rtpagent_guard_foreign_sources_total",
    "Learn digests from a foreign source on an offloaded call's guarded relay port",
)
GUARD_DROPPED = Counter(
    "rtpagent_guard_dropped_packets_total",
    "Foreign packets the switch's relay guard dropped (its counters, as read)",
)
IDLE_TIMEOUTS = Counter(
    "rtpagent_idle_timeouts_total", "Sessions ended because the switch saw them idle"
)
RTPP_TIMEOUTS = Counter(
    "rtpagent_rtpproxy_timeouts_total", "Timeout notifications from RTPProxy", ["action"]
)
NOTIFY_REFUSED = Counter(
    "rtpagent_notify_refused_total",
    "U commands naming a timeout socket outside the allow list (forwarded unchanged, not notified)",
)
REFRESHES = Counter("rtpagent_refreshes_total", "Session timer refreshes sent to RTPProxy")
SWITCH_UP = Gauge("rtpagent_switch_connected", "1 when the switch is reachable")
SPOOL_DEPTH = Gauge("rtpagent_spool_depth", "Reports waiting in the durable spool")
SPOOL_SENT = Counter("rtpagent_spool_sent_total", "Reports delivered to the server")
SPOOL_ERRORS = Counter("rtpagent_spool_errors_total", "Failed deliveries (retried)", ["kind"])
OFFLOAD_LATENCY = Histogram(
    "rtpagent_offload_seconds",
    "Answer reply sent -> the switch acknowledged the call's entries",
    buckets=(0.0005, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.05, 0.1, 0.5, 1.0),
)
RELOADS = Counter(
    "rtpagent_config_reloads_total",
    "Configuration reloads (SIGHUP): applied (validated; changed settings take effect at a "
    "restart), invalid (refused, the running settings kept)",
    ["result"],
)
ONE_WAY = Counter(
    "rtpagent_one_way_media_total",
    "Offloaded calls found with one direction silent while the other flows",
    ["direction"],
)
ONE_WAY_CALLS = Gauge(
    "rtpagent_one_way_media_calls", "Offloaded calls whose media flows one way only now"
)
