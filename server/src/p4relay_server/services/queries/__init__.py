"""Read side: one module per resource (calls, events, congestion, paths, queues,
activity, agents, fleet metrics); the API routes use the names gathered here."""

from p4relay_server.services.queries.activity import activity
from p4relay_server.services.queries.agents import agents
from p4relay_server.services.queries.common import (
    MAX_POINTS,
    BadQuery,
    decode_cursor,
    encode_cursor,
    endpoint_text,
)
from p4relay_server.services.queries.congestion import CONGESTION_LOOKBACK, congestion_episodes
from p4relay_server.services.queries.events import list_events
from p4relay_server.services.queries.fleet_metrics import fleet_metrics
from p4relay_server.services.queries.paths import (
    hops_text,
    int_session_path,
    list_int_paths,
    session_path,
)
from p4relay_server.services.queries.queues import queue_series
from p4relay_server.services.queries.sessions import (
    SessionFilter,
    iter_sessions,
    list_sessions,
    quality_series,
    session_detail,
)

__all__ = [
    "CONGESTION_LOOKBACK",
    "MAX_POINTS",
    "BadQuery",
    "SessionFilter",
    "activity",
    "agents",
    "congestion_episodes",
    "decode_cursor",
    "encode_cursor",
    "endpoint_text",
    "fleet_metrics",
    "hops_text",
    "int_session_path",
    "iter_sessions",
    "list_events",
    "list_int_paths",
    "list_sessions",
    "quality_series",
    "queue_series",
    "session_detail",
    "session_path",
]
