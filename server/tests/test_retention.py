"""Retention: raw samples folded into buckets, old buckets expired, audit kept."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from conftest import Auth, batch, iso, sample_item, session_item
from fastapi.testclient import TestClient
from p4relay_server.app import create_app
from p4relay_server.config import Retention
from p4relay_server.models import CallSession, Event, QualitySample, QueueSample
from p4relay_server.retention import run_retention
from p4relay_testsupport import wait_until
from sqlalchemy import Engine, func, select

NOW = dt.datetime(2026, 11, 21, 12, 0, tzinfo=dt.UTC)


def test_fold_and_expire(client: TestClient, auth: Auth, clean: Engine) -> None:
    old = NOW - dt.timedelta(hours=50)  # beyond raw_hours=48: folded into 60 s buckets
    ancient = NOW - dt.timedelta(days=40)  # beyond downsampled_days=30: expired after folding
    recent = NOW - dt.timedelta(hours=1)
    key = "ret;1"
    samples = [
        sample_item(key, t + dt.timedelta(seconds=s), lost=s % 3)
        for t in (old, ancient, recent)
        for s in range(120)
    ]
    qs = [
        {
            "switch": "sw1",
            "dev_port": 1,
            "ts": iso(t + dt.timedelta(seconds=s)),
            "depth_pkts": s,
            "drops": 1,
            "ired_qavg_bytes": 80 * s,
        }
        for t in (old, recent)
        for s in range(120)
    ]
    ev = [{"event_id": "ev-ret-0001", "type": "agent_up", "ts": iso(ancient)}]
    r = client.post(
        "/api/v1/ingest",
        json=batch(
            sessions=[session_item(key, started_at=iso(ancient))],
            samples=samples,
            queue_samples=qs,
            events=ev,
        ),
        headers=auth.ingest,
    )
    assert r.status_code == 200
    with clean.connect() as c:
        lost_old = c.execute(
            select(func.sum(QualitySample.lost)).where(
                QualitySample.ts < old + dt.timedelta(hours=1), QualitySample.ts >= old
            )
        ).scalar()

    report = run_retention(
        clean, Retention(raw_hours=48, bucket_seconds=60, downsampled_days=30), now=NOW
    )
    assert report.quality_buckets == 4  # 2 minutes each of `old` and `ancient`
    assert report.quality_expired == 2  # the `ancient` buckets
    assert report.queue_buckets == 2
    with clean.connect() as c:
        rows = c.execute(
            select(
                QualitySample.resolution_s,
                func.count(),
                func.sum(QualitySample.packets),
                func.sum(QualitySample.lost),
            )
            .group_by(QualitySample.resolution_s)
            .order_by(QualitySample.resolution_s)
        ).all()
        q_rows = c.execute(
            select(
                QueueSample.resolution_s,
                func.count(),
                func.sum(QueueSample.drops),
                func.max(QueueSample.depth_max_pkts),
                func.avg(QueueSample.ired_qavg_bytes),
            )
            .group_by(QueueSample.resolution_s)
            .order_by(QueueSample.resolution_s)
        ).all()
        sessions = c.execute(select(func.count()).select_from(CallSession)).scalar()
        events = c.execute(select(func.count()).select_from(Event)).scalar()
    assert rows == [(0, 120, 120 * 50, sum(s % 3 for s in range(120))), (60, 2, 120 * 50, lost_old)]
    # iRED's queue average folds into each bucket's mean (80 x 0..119 in both).
    assert [tuple(r) for r in q_rows] == [
        (0, 120, 120, 119, 80 * 59.5),
        (60, 2, 120, 119, 80 * 59.5),
    ]
    assert (sessions, events) == (1, 1)  # audit records are kept

    again = run_retention(
        clean, Retention(raw_hours=48, bucket_seconds=60, downsampled_days=30), now=NOW
    )
    assert again.quality_buckets == again.quality_expired == 0


def test_series_reads_downsampled_rows(client: TestClient, auth: Auth, clean: Engine) -> None:
    key = "ret;2"
    t = NOW - dt.timedelta(hours=72)
    client.post(
        "/api/v1/ingest",
        json=batch(
            sessions=[session_item(key)],
            samples=[sample_item(key, t + dt.timedelta(seconds=s)) for s in range(60)],
        ),
        headers=auth.ingest,
    )
    run_retention(clean, Retention(raw_hours=48, bucket_seconds=60, downsampled_days=30), now=NOW)
    sid = client.get("/api/v1/sessions", headers=auth.viewer).json()["items"][0]["id"]
    series = client.get(f"/api/v1/sessions/{sid}/quality", headers=auth.viewer).json()
    assert sum(p["packets"] for p in series[0]["points"]) == 60 * 50
    assert series[0]["points"][0]["mos"] == pytest.approx(4.409, abs=1e-3)


def test_serve_runs_retention_periodically(
    settings: Any, clean: Engine, auth: Auth, client: TestClient
) -> None:
    key = "ret;3"
    old = dt.datetime.now(dt.UTC) - dt.timedelta(hours=60)
    client.post(
        "/api/v1/ingest",
        json=batch(samples=[sample_item(key, old + dt.timedelta(seconds=s)) for s in range(30)]),
        headers=auth.ingest,
    )
    fast = settings.model_copy(update={"retention": Retention(interval_minutes=0.005)})  # 0.3 s

    def raw_samples() -> int:
        with clean.connect() as c:
            n = c.execute(select(func.count()).where(QualitySample.resolution_s == 0)).scalar()
        return int(n or 0)

    assert raw_samples() == 30
    with TestClient(create_app(fast, clean)):
        wait_until(lambda: raw_samples() == 0, within=20.0, what="raw samples folded")
