"""Sessions: filtered keyset-paginated list, detail, quality series, CSV export."""

from __future__ import annotations

import csv
import datetime as dt
import io
import ipaddress
from collections.abc import Iterator
from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Query, Request, status
from fastapi.responses import StreamingResponse
from sqlalchemy.orm import Session, sessionmaker

from p4relay_server.api.deps import AUTH_RESPONSES, DB, BigId, Reader
from p4relay_server.models import CallSession
from p4relay_server.schemas import api
from p4relay_server.schemas.ingest import IPAddress, SessionState, Timestamp
from p4relay_server.services import queries

router = APIRouter(prefix="/sessions", tags=["sessions"], responses=AUTH_RESPONSES)
_404: dict[int | str, dict[str, Any]] = {404: {"description": "no such session"}}
CSV_MAX_ROWS = 1_000_000


async def session_filter(  # async: pure, no threadpool hop
    started_from: Annotated[Timestamp | None, Query(description="started at or after")] = None,
    started_to: Annotated[Timestamp | None, Query(description="started before")] = None,
    state: Annotated[list[SessionState] | None, Query(description="any of these states")] = None,
    offloaded: bool | None = None,
    mos_min: Annotated[float | None, Query(ge=1, le=5)] = None,
    mos_max: Annotated[float | None, Query(ge=1, le=5)] = None,
    loss_min: Annotated[
        float | None, Query(ge=0, le=100, description="loss over the call at least this %")
    ] = None,
    jitter_min: Annotated[
        float | None, Query(ge=0, le=60000, description="worst jitter at least this many ms")
    ] = None,
    call_id: Annotated[
        str | None, Query(min_length=1, max_length=512, pattern=r"^[^\x00]*$")
    ] = None,
    address: Annotated[
        IPAddress | None,
        Query(description="a party (endpoint) address of any leg"),
    ] = None,
    prefix: Annotated[
        str | None,
        Query(
            max_length=64,
            description="a party (endpoint) address of any leg within this prefix, "
            "IPv4 or IPv6 (`fd00::/8`, `198.18.1.0/24`; host bits are ignored)",
        ),
    ] = None,
    switch: Annotated[
        str | None, Query(min_length=1, max_length=128, pattern=r"^[^\x00]*$")
    ] = None,
) -> queries.SessionFilter:
    return queries.SessionFilter(
        started_from=started_from,
        started_to=started_to,
        state=state or (),
        offloaded=offloaded,
        mos_min=mos_min,
        mos_max=mos_max,
        loss_min_pct=loss_min,
        jitter_min_ms=jitter_min,
        call_id=call_id,
        address=address,
        prefix=_prefix(prefix),
        switch=switch,
    )


def _prefix(text: str | None) -> ipaddress.IPv4Network | ipaddress.IPv6Network | None:
    """A CIDR prefix; host bits set are dropped (an operator's `10.1.2.3/24`)."""
    if text is None:
        return None
    try:
        if "%" in text:
            raise ValueError("an IPv6 zone (%...) has no place in a prefix")
        return ipaddress.ip_network(text, strict=False)
    except ValueError as e:
        raise HTTPException(
            status.HTTP_422_UNPROCESSABLE_CONTENT,
            [{"loc": ["query", "prefix"], "msg": f"not an IP prefix: {e}", "type": "value_error"}],
        ) from e


Filter = Annotated[queries.SessionFilter, Depends(session_filter)]
Cursor = Annotated[
    str | None, Query(max_length=200, description="next_cursor of the previous page")
]


def _bad(e: queries.BadQuery) -> HTTPException:
    return HTTPException(
        status.HTTP_422_UNPROCESSABLE_CONTENT,
        [{"loc": ["query"], "msg": str(e), "type": "value_error"}],
    )


@router.get("", response_model=api.SessionPage)
def list_sessions(
    db: DB,
    _: Reader,
    f: Filter,
    cursor: Cursor = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
) -> api.SessionPage:
    """Newest first; keyset pagination with `cursor`."""
    try:
        return queries.list_sessions(db, f, cursor, limit)
    except queries.BadQuery as e:
        raise _bad(e) from e


CSV_COLUMNS = [
    "id", "session_key", "call_id", "from_tag", "to_tag", "state", "offloaded", "offload_reason",
    "codec", "switch", "agent", "caller", "callee", "started_at", "answered_at", "ended_at", "packets", "bytes",
    "lost", "mos_avg", "mos_min", "jitter_ms_max",
]  # fmt: skip


@router.get(
    "/export.csv",
    response_class=StreamingResponse,
    responses={200: {"content": {"text/csv": {}}, "description": "sessions as CSV"}},
)
def export_csv(
    request: Request,
    _: Reader,
    f: Filter,
    limit: Annotated[int, Query(ge=1, le=CSV_MAX_ROWS)] = CSV_MAX_ROWS,
) -> StreamingResponse:
    """Audit export with the same filters as the list (newest first)."""
    maker: sessionmaker[Session] = request.app.state.sessionmaker

    def rows() -> Iterator[str]:
        buf = io.StringIO()
        out = csv.writer(buf)
        out.writerow(CSV_COLUMNS)
        with maker() as db:
            for i, s in enumerate(queries.iter_sessions(db, f, limit)):
                out.writerow(_csv_value(getattr(s, c)) for c in CSV_COLUMNS)
                if i % 500 == 0:
                    yield buf.getvalue()
                    buf.seek(0)
                    buf.truncate()
        yield buf.getvalue()

    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    return StreamingResponse(
        rows(),
        media_type="text/csv",
        headers={"Content-Disposition": f'attachment; filename="p4relay-sessions-{stamp}.csv"'},
    )


def _csv_value(v: object) -> object:
    if isinstance(v, dt.datetime):
        return v.isoformat()
    if isinstance(v, str) and v[:1] in ("=", "+", "-", "@"):
        return "'" + v  # keep spreadsheet formulas out of audit exports
    return "" if v is None else v


@router.get("/{session_id}", response_model=api.SessionDetail, responses=_404)
def get_session(session_id: BigId, db: DB, _: Reader) -> api.SessionDetail:
    """Legs and rewrite entries, quality series per direction, events."""
    if not 0 < session_id < 2**63:
        raise HTTPException(status.HTTP_404_NOT_FOUND, "no such session")
    d = queries.session_detail(db, session_id)
    if d is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, "no such session")
    return d


@router.get("/{session_id}/quality", response_model=list[api.QualitySeries], responses=_404)
def get_quality(
    session_id: BigId,
    db: DB,
    _: Reader,
    start: Annotated[Timestamp | None, Query(alias="from")] = None,
    end: Annotated[Timestamp | None, Query(alias="to")] = None,
    resolution_s: Annotated[int | None, Query(ge=1, le=86400)] = None,
) -> list[api.QualitySeries]:
    """Quality per direction, downsampled to `resolution_s` (at most 1000 points)."""
    if not 0 < session_id < 2**63 or db.get(CallSession, session_id) is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, "no such session")
    if start and end and end <= start:
        raise _bad(queries.BadQuery("to: must be after from"))
    return queries.quality_series(db, session_id, start, end, resolution_s)
