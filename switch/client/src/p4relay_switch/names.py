"""The names p4relay's control plane uses, as `switch/contract.toml` declares
them (tests/test_contract.py checks they match it)."""

from __future__ import annotations

from collections.abc import Container

# contract.toml [config], generated from the contract (UNBOUND_PORT: the relay
# key port of a flow from a port whose binding is off).
from p4relay_switch.contract_config import INT_DSCP as INT_DSCP
from p4relay_switch.contract_config import INT_FLOW_SLOTS as INT_FLOW_SLOTS
from p4relay_switch.contract_config import INT_MAX_HOPS as INT_MAX_HOPS
from p4relay_switch.contract_config import INT_REPORT_INTERVAL_MS as INT_REPORT_INTERVAL_MS
from p4relay_switch.contract_config import IRED_CELL_BYTES as IRED_CELL_BYTES
from p4relay_switch.contract_config import IRED_EWMA_N_MAX as IRED_EWMA_N_MAX
from p4relay_switch.contract_config import JITTER_SHIFT as JITTER_SHIFT
from p4relay_switch.contract_config import RELAY6_IDS as RELAY6_IDS
from p4relay_switch.contract_config import REROUTE_NOTICE_ETHERTYPE as REROUTE_NOTICE_ETHERTYPE
from p4relay_switch.contract_config import REROUTE_SLOTS as REROUTE_SLOTS
from p4relay_switch.contract_config import RTP_CLOCK_HZ as RTP_CLOCK_HZ
from p4relay_switch.contract_config import UNBOUND_PORT as UNBOUND_PORT

IPV4_LPM = "pipe.Ingress.ipv4_lpm"
NEXTHOP = "pipe.Ingress.nexthop"
RELAY_ADDR = "pipe.Ingress.relay_addr"
RELAY = "pipe.Ingress.relay"
RELAY_GUARD = "pipe.Ingress.relay_guard"
LEG_REWRITE = "pipe.Ingress.leg_rewrite"
# Foreign packets relay_guard dropped, by leg (an indexed Counter, contract v5).
GUARD_DROPS = "pipe.Ingress.guard_drops"
LEARN_DIGEST = "pipe.IngressDeparser.learn"
# IPv6 (contract v6): the relay's IPv6 address is an 8-bit relay_id
# (relay6_addr), the key relay6 and relay_guard6 use in its place.
IPV6_LPM = "pipe.Ingress.ipv6_lpm"
RELAY6_ADDR = "pipe.Ingress.relay6_addr"
RELAY6 = "pipe.Ingress.relay6"
RELAY_GUARD6 = "pipe.Ingress.relay_guard6"
LEG_REWRITE6 = "pipe.Ingress.leg_rewrite6"
LEARN6_DIGEST = "pipe.IngressDeparser.learn6"
A_MARK_RELAY6 = "Ingress.mark_relay6"
A_RELAY6_LEG = "Ingress.relay6_leg"
A_REWRITE6 = "Ingress.rewrite6"
A_GUARD6_DROP = "Ingress.guard6_drop"
K6_SRC_ADDR = "hdr.ipv6.src_addr"
K6_DST_ADDR = "hdr.ipv6.dst_addr"
K_RELAY_ID = "ig_md.relay_id"
K_LEG6 = "ig_md.leg6"
# Port binding per ingress port: the port's phase-0 data. unbound = 1: relay
# keys on UNBOUND_PORT for packets from the port (binding off there).
PORT_METADATA = "pipe.IngressParser.$PORT_METADATA"
K_PORT_METADATA_PORT = "ig_intr_md.ingress_port"
D_UNBOUND = "unbound"
# Congestion reroute (standard profile).
REROUTE_WATCH = "pipe.Ingress.reroute_watch"
# IPv6 destinations (programs with IPv6): the same actions, slots and classes.
REROUTE_WATCH6 = "pipe.Ingress.reroute_watch6"
REROUTE_CLASS = "pipe.Egress.reroute_class"
REROUTE_DIGEST = "pipe.IngressDeparser.reroute"
REG_REROUTE_ACTIVE = "pipe.Ingress.reroute_active"
REG_REROUTE_FROM = "pipe.Ingress.reroute_from"
REG_REROUTE_RUN = "pipe.Egress.reroute_run"
REG_REROUTE_PORT_HOT = "pipe.Egress.reroute_port_hot"
A_REROUTE_BACKUP = "Ingress.reroute_backup"
A_REROUTE_NOTIFY = "Ingress.reroute_notify"
A_REROUTE_THRESHOLDS = "Egress.reroute_thresholds"
K_RR_CLASS = "hdr.bridged.rr_class"

A_SET_NEXTHOP = "Ingress.set_nexthop"
A_FORWARD = "Ingress.forward"
A_DROP = "Ingress.drop"
A_MARK_RELAY = "Ingress.mark_relay"
A_RELAY_LEG = "Ingress.relay_leg"
A_REWRITE = "Ingress.rewrite"
A_GUARD_DROP = "Ingress.guard_drop"

# RTP quality per leg, measured as packets leave the egress queue (contract v2),
# so tail drops count as lost and queueing delay variation as jitter.
REG_PACKETS = "pipe.Egress.rtp_packets"
# A register's one value field (bf-p4c names a plain register's data `f1`).
F_VALUE = "f1"
# A leg's loss counts take the program's target's form (contract v10): on
# Tofino 1 (and the software switch) one register of two fields, a cell
# written with both (bf-p4c makes each mandatory); on Tofino 2 two registers
# of one value. `loss_values` picks the form from the program's tables.
REG_LOSS = "pipe.Egress.rtp_loss"
F_LOST = "lost"  # sequence gaps: packets missing when a higher seq arrives
F_REORDERED = "reordered"  # arrived with seq below the highest seen
REG_LOST = "pipe.Egress.rtp_lost"
REG_REORDERED = "pipe.Egress.rtp_reordered"
LOSS_FIELDS = ((REG_LOSS, F_LOST), (REG_LOSS, F_REORDERED))
LOSS_REGISTERS = ((REG_LOST, F_VALUE), (REG_REORDERED, F_VALUE))
REG_MAX_SEQ = "pipe.Egress.rtp_max_seq"
REG_TRANSIT = "pipe.Egress.rtp_transit"
REG_JITTER = "pipe.Egress.rtp_jitter"
REG_LAST_SEEN = "pipe.Egress.rtp_last_seen"
REG_PAYLOAD_TYPE = "pipe.Egress.rtp_payload_type"
# A program that splits them (contract `split`) names each upper half so.
QUALITY_HI_SUFFIX = "_hi"

RegisterValue = tuple[str, str]  # (register, its data field's short name)


def loss_values(tables: Container[str]) -> tuple[RegisterValue, RegisterValue]:
    """Where a program whose tables are `tables` keeps a leg's lost and
    reordered counts: rtp_loss's two fields if it declares rtp_loss, else
    rtp_lost's and rtp_reordered's values."""
    return LOSS_FIELDS if REG_LOSS in tables else LOSS_REGISTERS


def quality_values(tables: Container[str]) -> tuple[RegisterValue, ...]:
    """The quality values in `LegQuality` order: (register, field)."""
    return (
        (REG_PACKETS, F_VALUE),
        *loss_values(tables),
        (REG_MAX_SEQ, F_VALUE),
        (REG_TRANSIT, F_VALUE),
        (REG_JITTER, F_VALUE),
        (REG_LAST_SEEN, F_VALUE),
        (REG_PAYLOAD_TYPE, F_VALUE),
    )


def quality_registers(tables: Container[str]) -> tuple[str, ...]:
    """The quality registers `quality_values` reads, in its order."""
    return tuple(dict.fromkeys(r for r, _ in quality_values(tables)))


def register_field(register: str, field: str = F_VALUE) -> str:
    """A register's data field as bf-p4c names it: `pipe.Egress.r`, `f1` ->
    `Egress.r.f1`."""
    return f"{register.removeprefix('pipe.')}.{field}"


K_SRC_ADDR = "hdr.ipv4.src_addr"
K_DST_ADDR = "hdr.ipv4.dst_addr"
K_SRC_PORT = "hdr.udp.src_port"
K_DST_PORT = "hdr.udp.dst_port"
K_BOUND_PORT = "ig_md.bound_port"  # the ingress port, or UNBOUND_PORT where binding is off
K_NEXTHOP_ID = "ig_md.nexthop_id"
K_LEG = "ig_md.leg"
K_PRIORITY = "$MATCH_PRIORITY"

TTL = "$ENTRY_TTL"
COUNTER_BYTES = "$COUNTER_SPEC_BYTES"
COUNTER_PKTS = "$COUNTER_SPEC_PKTS"
COUNTER_INDEX = "$COUNTER_INDEX"


# iRED (Egress decides, Ingress drops), per egress dev_port.
IRED_PORT = "pipe.Egress.ired_port"
A_IRED_SET = "Egress.ired_set"
K_EGRESS_PORT = "eg_intr_md.egress_port"
# The signalling class a protecting port spares (ternary by priority): the
# DSCP of either family and the UDP ports (0 for anything but UDP).
IRED_SPARE = "pipe.Ingress.ired_spare"
A_IRED_SPARE_PACKET = "Ingress.ired_spare_packet"
K_DSCP = "ig_md.dscp"
K_L4_SRC_PORT = "ig_md.l4_src_port"
K_L4_DST_PORT = "ig_md.l4_dst_port"
REG_IRED_QDEPTH_PREV = "pipe.Egress.ired_qdepth_prev"
REG_IRED_QAVG = "pipe.Egress.ired_qavg"
REG_IRED_DROP_PROB = "pipe.Egress.ired_drop_prob"
REG_IRED_DROP_FLAG = "pipe.Ingress.ired_drop_flag"
IRED_REGISTERS = (
    REG_IRED_QDEPTH_PREV,
    REG_IRED_QAVG,
    REG_IRED_DROP_PROB,
    REG_IRED_DROP_FLAG,
)
# iRED's counts: indexed packet Counters by dev_port (contract v9).
IRED_DECISIONS = "pipe.Egress.ired_decisions"
IRED_TAIL_DROPS = "pipe.Egress.ired_tail_drops"
IRED_FLAGS_SET = "pipe.Ingress.ired_flags_set"
IRED_DROPS = "pipe.Ingress.ired_drops"
IRED_SPARED = "pipe.Ingress.ired_spared"
IRED_COUNTERS = (
    IRED_DECISIONS,
    IRED_TAIL_DROPS,
    IRED_FLAGS_SET,
    IRED_DROPS,
    IRED_SPARED,
)

# INT (in-band network telemetry): watch list and roles in Ingress, the hop
# and the telemetry report in Egress.
INT_WATCH = "pipe.Ingress.int_watch"
INT_WATCH6 = "pipe.Ingress.int_watch6"
INT_ROLE = "pipe.Ingress.int_role"
INT_HOP_CONFIG = "pipe.Egress.int_hop_config"
INT_REPORT = "pipe.Egress.int_report"
A_INT_WATCH_FLOW = "Ingress.int_watch_flow"
A_INT_TRANSIT = "Ingress.int_transit"
A_INT_SINK = "Ingress.int_sink"
A_INT_HOP = "Egress.int_hop"
A_INT_REPORT_ENCAP = "Egress.int_report_encap"
K_BRIDGED_RELAY = "hdr.bridged.relay"
K_BRIDGED_LEG = "hdr.bridged.leg"
REG_INT_MALFORMED = "pipe.Ingress.int_malformed"
REG_INT_TX_BYTES = "pipe.Egress.int_tx_bytes"
REG_INT_HOP_LIMIT = "pipe.Egress.int_hop_limit"
REG_INT_FLOW_PATH = "pipe.Egress.int_flow_path"
REG_INT_FLOW_CONGESTED = "pipe.Egress.int_flow_congested"
REG_INT_FLOW_REPORTED = "pipe.Egress.int_flow_reported"
REG_INT_REPORT_SEQ = "pipe.Egress.int_report_seq"
REG_INT_SINK_DEPTH = "pipe.Egress.int_sink_depth"
REG_INT_SINK_LATENCY = "pipe.Egress.int_sink_latency"
INT_REGISTERS = (
    REG_INT_MALFORMED,
    REG_INT_TX_BYTES,
    REG_INT_HOP_LIMIT,
    REG_INT_FLOW_PATH,
    REG_INT_FLOW_CONGESTED,
    REG_INT_FLOW_REPORTED,
    REG_INT_REPORT_SEQ,
    REG_INT_SINK_DEPTH,
    REG_INT_SINK_LATENCY,
)
