"""Switch queues: depth, delay, utilisation and drops over time, downsampled."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import func, literal, select
from sqlalchemy.orm import Session

from p4relay_server.models import (
    QueueSample,
    Switch,
)
from p4relay_server.schemas import api
from p4relay_server.services.queries.common import BadQuery, auto_resolution


def queue_series(
    db: Session,
    switch: Switch | None,
    start: dt.datetime,
    end: dt.datetime,
    resolution_s: int | None,
    dev_port: int | None,
    queue: int | None,
) -> list[api.QueueSeries]:
    """Queue series of one switch, or of every switch (`switch` None: each
    hop of the fleet, as the INT reports and the collector's polls give them)."""
    if end <= start:
        raise BadQuery("to: must be after from")
    res = auto_resolution(start, end, resolution_s)
    q_ = QueueSample
    bucket = func.date_bin(
        dt.timedelta(seconds=res), q_.ts, literal(dt.datetime(2000, 1, 1, tzinfo=dt.UTC))
    )
    q = select(
        Switch.name,
        q_.dev_port,
        q_.queue,
        bucket.label("b"),
        func.avg(q_.depth_pkts),
        func.max(q_.depth_max_pkts),
        func.avg(q_.depth_bytes),
        func.avg(q_.queue_delay_us),
        func.max(q_.queue_delay_max_us),
        func.avg(q_.utilisation),
        func.sum(q_.drops),
        func.avg(q_.ired_qavg_bytes),
    ).join(Switch, Switch.id == q_.switch_id)
    q = q.where(q_.ts >= start, q_.ts < end)
    if switch is not None:
        q = q.where(q_.switch_id == switch.id)
    if dev_port is not None:
        q = q.where(q_.dev_port == dev_port)
    if queue is not None:
        q = q.where(q_.queue == queue)
    q = q.group_by(Switch.name, q_.dev_port, q_.queue, "b").order_by(
        Switch.name, q_.dev_port, q_.queue, "b"
    )
    out: dict[tuple[str, int, int], api.QueueSeries] = {}
    for (
        name,
        port,
        qid,
        b,
        depth,
        depth_max,
        depth_b,
        delay,
        delay_max,
        util,
        drops,
        qavg,
    ) in db.execute(q):
        s = out.setdefault(
            (name, port, qid),
            api.QueueSeries(switch=name, dev_port=port, queue=qid, resolution_s=res, points=[]),
        )
        s.points.append(
            api.QueuePoint(
                ts=b,
                depth_pkts=depth,
                depth_max_pkts=depth_max,
                depth_bytes=depth_b,
                queue_delay_us=delay,
                queue_delay_max_us=delay_max,
                utilisation=util,
                drops=int(drops or 0),
                ired_qavg_bytes=qavg,
            )
        )
    return list(out.values())
