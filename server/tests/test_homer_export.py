"""Quality reports to Homer, received by Homer 5's capture server: Kamailio's
sipcapture module decoding HEPv3 (every chunk) and storing into PostgreSQL.
Calls are ingested as agents send them; each offloaded call's legs must be
filed under its Call-ID with the figures the server holds (within 1 %)."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import shutil
import socket
import struct
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import Auth, batch, sample_item, session_item
from fastapi.testclient import TestClient
from p4relay_server.app import create_app
from p4relay_server.config import Homer, Settings
from p4relay_server.hep import decode_hep3
from p4relay_testsupport import homer as homer_support
from p4relay_testsupport.homer import HomerCapture
from p4relay_testsupport.net import free_port
from p4relay_testsupport.wait import wait_until
from prometheus_client import REGISTRY
from pydantic import SecretStr
from sqlalchemy import Engine, text

AUTH_KEY = "homer-test-key"
CAPTURE_ID = 2042

needs_kamailio = pytest.mark.skipif(
    shutil.which("kamailio") is None or not homer_support.available(),
    reason="Kamailio with sipcapture and db_postgres (make setup installs them)",
)


def _free_port() -> int:
    """A loopback UDP port nothing listens on."""
    return free_port(socket.SOCK_DGRAM)


def wait_for(what: str, cond: Callable[[], object], timeout: float = 20.0) -> None:
    wait_until(cond, timeout, what=what)


@pytest.fixture
def receiver(db_url: str, tmp_path: Path) -> Iterator[HomerCapture]:
    with homer_support.homer_capture(db_url, tmp_path / "homer", AUTH_KEY) as capture:
        yield capture


def _settings(base: Settings, **homer: Any) -> Settings:
    return base.model_copy(update={"homer": Homer(**homer)})


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(microsecond=0)


def _calls(n: int) -> list[str]:
    return [f"hep-call-{i}'{os.getpid()}@198.18.1.10;ft" for i in range(n)]


def _ingest_call(client: TestClient, auth: Auth, key: str, i: int, state: str, seq: int) -> None:
    t0 = _now() - dt.timedelta(seconds=10)
    samples = [
        sample_item(
            key,
            t0 + dt.timedelta(seconds=s),
            direction=d,
            packets=50 - (s + i) % 3,
            lost=(s + i + j) % 3,
            jitter_ms=0.5 + 0.7 * i + 0.3 * s + j,
            delay_ms=12.0 + i + j,
        )
        for s in range(5)
        for j, d in enumerate(("caller_to_callee", "callee_to_caller"))
    ]
    extra: dict[str, Any] = {"state": state}
    if state == "ended":
        extra["ended_at"] = _now().isoformat()
    r = client.post(
        "/api/v1/ingest",
        json=batch(sessions=[session_item(key, seq, **extra)], samples=samples if seq == 1 else []),
        headers=auth.ingest,
    )
    assert r.status_code == 200, r.text


def _server_figures(engine: Engine, key: str) -> dict[str, dict[str, float]]:
    with engine.connect() as c:
        rows = c.execute(
            text(
                "SELECT direction, sum(packets), sum(lost), avg(jitter_ms), avg(mos), "
                "avg(r_factor), min(mos) FROM quality_samples WHERE session_key = :k "
                "GROUP BY direction"
            ),
            {"k": key},
        )
        return {
            r[0]: {
                "packets": float(r[1]),
                "lost": float(r[2]),
                "jitter_ms": r[3],
                "mos": r[4],
                "r_factor": r[5],
                "mos_min": r[6],
            }
            for r in rows
        }


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= 0.01 * max(abs(a), abs(b)) + 1e-9


def _reports(rec: HomerCapture, call_id: str, final: bool) -> dict[str, dict[str, Any]]:
    """The receiver's latest report per direction for a Call-ID."""
    out: dict[str, dict[str, Any]] = {}
    for row in rec.rows():
        if row["correlation_id"] != call_id:
            continue
        doc = json.loads(row["msg"])
        if doc["p4relay"]["final"] == final:
            out[doc["p4relay"]["direction"]] = {"row": row, "doc": doc}
    return out


def _both_legs(rec: HomerCapture, call_id: str, *, final: bool) -> Callable[[], bool]:
    return lambda: len(_reports(rec, call_id, final)) == 2


@needs_kamailio
@pytest.mark.parametrize("transport", ["udp", "tcp"])
def test_reports_filed_under_the_call_id_with_the_servers_figures(
    receiver: HomerCapture, settings: Settings, clean: Engine, transport: str
) -> None:
    cfg = _settings(
        settings,
        address=f"127.0.0.1:{receiver.port}",
        transport=transport,
        capture_id=CAPTURE_ID,
        auth_key=SecretStr(AUTH_KEY),
        interval_s=0.3,
    )
    keys = _calls(3)
    with TestClient(create_app(cfg, clean)) as client:
        auth = Auth(clean, client)
        for i, key in enumerate(keys):
            _ingest_call(client, auth, key, i, "active", 1)
        # A call left on RTPProxy is not reported.
        rtpproxy_key = f"rtpproxy-{os.getpid()}@x;ft"
        r = client.post(
            "/api/v1/ingest",
            json=batch(
                sessions=[session_item(rtpproxy_key, offloaded=False, legs=[])],
                samples=[sample_item(rtpproxy_key, _now())],
            ),
            headers=auth.ingest,
        )
        assert r.status_code == 200
        call_ids = [k.split(";")[0] for k in keys]
        # While the calls are up: interval reports for both legs of each.
        for cid in call_ids:
            wait_for(f"interval reports of {cid}", _both_legs(receiver, cid, final=False))
        for i, key in enumerate(keys):
            _ingest_call(client, auth, key, i, "ended", 2)
        for cid in call_ids:
            wait_for(f"final reports of {cid}", _both_legs(receiver, cid, final=True))
    legs = {leg["direction"]: leg for leg in session_item("x")["legs"]}  # every call's legs

    rows = receiver.rows()
    assert {r["correlation_id"] for r in rows} == set(call_ids), "only offloaded calls, by Call-ID"
    matched = 0
    for key, cid in zip(keys, call_ids, strict=True):
        server = _server_figures(clean, key)
        for direction, got in _reports(receiver, cid, True).items():
            row, doc = got["row"], got["doc"]
            want = server[direction]
            mine = doc["p4relay"]
            # Every chunk as the receiver decoded it.
            assert (row["family"], row["proto"], row["type"]) == (2, 17, 5)
            assert row["capture_id"] == CAPTURE_ID
            assert row["source_ip"] == legs[direction]["relay_out"]["addr"]
            assert row["source_port"] == legs[direction]["relay_out"]["port"]
            assert row["destination_ip"] == legs[direction]["dst"]["addr"]
            assert row["destination_port"] == legs[direction]["dst"]["port"]
            assert abs(row["micro_ts"] / 1e6 - time.time()) < 120
            # The server's figures for the leg, within 1 %.
            assert mine["packets"] == want["packets"] and mine["lost"] == want["lost"]
            expected = want["packets"] + want["lost"]
            assert _close(mine["loss_pct"], 100 * want["lost"] / expected)
            assert _close(mine["jitter_ms"], want["jitter_ms"])
            assert _close(mine["mos"], want["mos"]) and _close(mine["r_factor"], want["r_factor"])
            # ... and in the RFC 3611 / RFC 3550 fields Homer reads.
            xr, rb = doc["report_blocks_xr"], doc["report_blocks"][0]
            assert xr["fraction_lost"] == int(want["lost"] * 256 // expected)
            assert xr["mos_cq"] == round(want["mos"] * 10)
            assert xr["r_factor"] == round(want["r_factor"])
            assert rb["packets_lost"] == want["lost"]
            assert rb["ia_jitter"] == round(want["jitter_ms"] * 8)
            matched += 1
    assert matched == 2 * len(keys)
    print(
        f"\n{transport}: {len(rows)} reports decoded, {len(call_ids)} Call-IDs, {matched} final legs matched"
    )


def test_undeliverable_reports_are_counted_and_ingest_goes_on(
    settings: Settings, clean: Engine
) -> None:
    port = _free_port()  # nothing listens: the ICMP errors fail the sends
    cfg = _settings(settings, address=f"127.0.0.1:{port}", interval_s=0.1)

    def failed() -> float:
        return (
            REGISTRY.get_sample_value("p4relay_homer_reports_total", {"outcome": "failed"}) or 0.0
        )

    before = failed()
    with TestClient(create_app(cfg, clean)) as client:
        auth = Auth(clean, client)
        for n in range(3):
            for i, key in enumerate(_calls(2)):
                _ingest_call(client, auth, f"{n}-{key}", i, "active", 1)
        wait_for("failed sends counted", lambda: failed() > before)
        r = client.post(
            "/api/v1/ingest", json=batch(sessions=[session_item("late;ft")]), headers=auth.ingest
        )
        assert r.status_code == 200


def _pcap(packets: list[tuple[str, int, str, int, bytes]]) -> bytes:
    """A pcap of IPv4/UDP datagrams (LINKTYPE_IPV4: no link header)."""
    out = [struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 228)]
    for src, sport, dst, dport, payload in packets:
        udp = struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload
        ip = struct.pack(
            "!BBHHHBBH4s4s",
            0x45,
            0,
            20 + len(udp),
            0,
            0,
            64,
            17,
            0,
            socket.inet_aton(src),
            socket.inet_aton(dst),
        )
        frame = ip + udp
        out.append(struct.pack("<IIII", 0, 0, len(frame), len(frame)) + frame)
    return b"".join(out)


def _fields(layer: Any, name: str) -> list[str]:
    """Every value of a field anywhere in a tshark JSON layer tree."""
    found: list[str] = []
    if isinstance(layer, dict):
        for k, v in layer.items():
            if k == name:
                found += v if isinstance(v, list) else [v]
            else:
                found += _fields(v, name)
    elif isinstance(layer, list):
        for v in layer:
            found += _fields(v, name)
    return found


@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark (make setup installs it)")
def test_binary_rtcp_payload_is_what_wiresharks_rtcp_dissector_reads(
    settings: Settings, clean: Engine, tmp_path: Path
) -> None:
    """payload = "rtcp": the RR and the RFC 3611 VoIP Metrics block as
    Wireshark's RTCP dissector decodes them carry the server's figures."""
    sink = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sink.bind(("127.0.0.1", 0))
    sink.settimeout(0.05)
    cfg = _settings(
        settings,
        address=f"127.0.0.1:{sink.getsockname()[1]}",
        payload="rtcp",
        interval_s=3600,  # finals only
    )
    keys = _calls(2)
    got: list[bytes] = []

    def four() -> bool:
        with contextlib.suppress(TimeoutError):
            got.append(sink.recv(65535))
        return len(got) >= 4

    with TestClient(create_app(cfg, clean)) as client:
        auth = Auth(clean, client)
        for i, key in enumerate(keys):
            _ingest_call(client, auth, key, i, "active", 1)
            _ingest_call(client, auth, key, i, "ended", 2)
        wait_for("4 final reports", four)
    sink.close()

    frames: list[tuple[str, int, str, int, bytes]] = []
    meta: list[tuple[str, str]] = []
    for pkt in got:
        c = decode_hep3(pkt)
        frames.append(
            (
                socket.inet_ntoa(c[0x0003]),
                struct.unpack("!H", c[0x0007])[0],
                socket.inet_ntoa(c[0x0004]),
                struct.unpack("!H", c[0x0008])[0],
                c[0x000F],
            )
        )
        meta.append((c[0x0011].decode(), frames[-1][2]))
    pcap = tmp_path / "rtcp.pcap"
    pcap.write_bytes(_pcap(frames))
    ports = sorted({f[3] for f in frames})
    cmd = ["tshark", "-r", str(pcap), "-T", "json", "--no-duplicate-keys"]
    for p in ports:
        cmd += ["-d", f"udp.port=={p},rtcp"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=True)
    decoded = json.loads(out.stdout)
    assert len(decoded) == 4
    by_dst = {leg["dst"]["addr"]: leg["direction"] for leg in session_item("x")["legs"]}
    for frame, (call_id, dst) in zip(decoded, meta, strict=True):
        rtcp = frame["_source"]["layers"]["rtcp"]
        key = next(k for k in keys if k.startswith(call_id + ";"))
        want = _server_figures(clean, key)[by_dst[dst]]
        expected = want["packets"] + want["lost"]
        assert _fields(rtcp, "rtcp.pt") == ["201", "207"]
        # RR block, then the XR VoIP Metrics loss rate (the dissector's name for both).
        fraction = [int(v) for v in _fields(rtcp, "rtcp.ssrc.fraction")]
        assert fraction[-1] == int(want["lost"] * 256 // expected)
        assert int(_fields(rtcp, "rtcp.ssrc.cum_nr")[0]) == want["lost"]
        assert int(_fields(rtcp, "rtcp.ssrc.jitter")[0]) == round(want["jitter_ms"] * 8)
        assert int(_fields(rtcp, "rtcp.xr.voipmetrics.rfactor")[0]) == round(want["r_factor"])
        # MOS-CQ is carried times 10; the dissector shows it divided back.
        assert float(_fields(rtcp, "rtcp.xr.voipmetrics.moscq")[0]) == round(want["mos"] * 10) / 10
        assert _fields(rtcp, "rtcp.xr.voipmetrics.signallevel") == ["127"]
        assert _fields(rtcp, "rtcp.xr.voipmetrics.gmin") == ["16"]
