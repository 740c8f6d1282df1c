"""p4relay's BfRt gRPC client: one API for the softswitch and bf_switchd.

See switch/client/README.md. ``SwitchClient`` (asyncio) speaks BfRt;
``Pipeline`` adds the contract's typed operations; ``BlockingSwitch`` wraps
the client for synchronous code (PTF).
"""

from p4relay_switch.blocking import BlockingSwitch
from p4relay_switch.client import (
    Backoff,
    Digest,
    Entry,
    IdleTableConfig,
    IdleTimeout,
    Notification,
    PortStatus,
    ReadEntry,
    Reconnected,
    Subscription,
    SwitchClient,
)
from p4relay_switch.codec import Lpm, Range, Ternary
from p4relay_switch.errors import (
    EncodeError,
    EntryExistsError,
    InvalidArgumentError,
    NotBoundError,
    NotFoundError,
    SchemaError,
    SwitchError,
    SwitchUnavailableError,
    TableFullError,
    WriteError,
)
from p4relay_switch.model import (
    CallEntries,
    Counters,
    Endpoint,
    EntryBatch,
    EntryDump,
    FlowKey,
    GuardEntry,
    GuardKey,
    LearnEvent,
    LegAllocator,
    LegQuality,
    LegRewrite,
    Nexthop,
    RelayCall,
    RelayDirection,
    RelayEntry,
    RelayIdle,
    Routes,
)
from p4relay_switch.names import JITTER_SHIFT, RTP_CLOCK_HZ
from p4relay_switch.pipeline import Pipeline
from p4relay_switch.schema import Schema

__all__ = [
    "JITTER_SHIFT",
    "RTP_CLOCK_HZ",
    "Backoff",
    "BlockingSwitch",
    "CallEntries",
    "Counters",
    "Digest",
    "EncodeError",
    "Endpoint",
    "Entry",
    "EntryBatch",
    "EntryDump",
    "EntryExistsError",
    "FlowKey",
    "GuardEntry",
    "GuardKey",
    "IdleTableConfig",
    "IdleTimeout",
    "InvalidArgumentError",
    "LearnEvent",
    "LegAllocator",
    "LegQuality",
    "LegRewrite",
    "Lpm",
    "Nexthop",
    "NotBoundError",
    "NotFoundError",
    "Notification",
    "Pipeline",
    "PortStatus",
    "Range",
    "ReadEntry",
    "Reconnected",
    "RelayCall",
    "RelayDirection",
    "RelayEntry",
    "RelayIdle",
    "Routes",
    "Schema",
    "SchemaError",
    "Subscription",
    "SwitchClient",
    "SwitchError",
    "SwitchUnavailableError",
    "TableFullError",
    "Ternary",
    "WriteError",
]
