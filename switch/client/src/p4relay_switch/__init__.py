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
from p4relay_switch.pipeline import (
    Endpoint,
    LearnEvent,
    LegAllocator,
    LegQuality,
    Nexthop,
    Pipeline,
    RelayCall,
    RelayDirection,
    RelayIdle,
)
from p4relay_switch.schema import Schema

__all__ = [
    "Backoff",
    "BlockingSwitch",
    "Digest",
    "EncodeError",
    "Endpoint",
    "Entry",
    "EntryExistsError",
    "IdleTimeout",
    "InvalidArgumentError",
    "LearnEvent",
    "LegAllocator",
    "LegQuality",
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
    "RelayIdle",
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
