"""What every read model shares: keyset cursors, the series point budget, endpoint text."""

from __future__ import annotations

import base64
import datetime as dt
import json

MAX_POINTS = 1000  # series are downsampled to at most this many points


class BadQuery(ValueError):
    """A query parameter that parses but makes no sense (answered with 422)."""


def encode_cursor(ts: dt.datetime, row_id: int) -> str:
    raw = json.dumps([ts.isoformat(), row_id]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[dt.datetime, int]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        ts_s, row_id = json.loads(raw)
        ts = dt.datetime.fromisoformat(ts_s)
        if ts.tzinfo is None or not isinstance(row_id, int):
            raise ValueError
        return ts, row_id
    except (ValueError, TypeError, json.JSONDecodeError, UnicodeDecodeError) as e:
        raise BadQuery("cursor: not a cursor returned by this API") from e


def endpoint_text(addr: object, port: int | None) -> str | None:
    """`addr:port`, IPv6 in brackets (`[2001:db8::1]:5004`)."""
    if addr is None or port is None:
        return None
    a = str(addr)
    return f"[{a}]:{port}" if ":" in a else f"{a}:{port}"


def auto_resolution(start: dt.datetime, end: dt.datetime, requested: int | None) -> int:
    span = max((end - start).total_seconds(), 1.0)
    floor = int(-(-span // MAX_POINTS))  # ceil: never more than MAX_POINTS buckets
    return max(requested or 1, floor, 1)
