"""Exact records through faults: the control socket from the process's first
moment, ends the agent missed taken from RTPProxy's accounting, calls placed
while the agent was away recorded, an answer's time from the answer, and a
switch restart losing no packet from the record. RTPProxy is the real one
(rtp.io) in its own process."""

from __future__ import annotations

import asyncio
import csv
import io
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import rtpagent.app as app_module
from fakeswitch import ROUTES, FakeSwitch
from harness import Client, RtpproxyProcess, free_port, free_udp_pair, settings, wait_for
from p4relay_switch import Counters, LegQuality, Routes
from prometheus_client import REGISTRY
from rtpagent.acct import AcctFile
from rtpagent.app import App
from rtpagent.early import EarlyRelay, settings_for
from rtpagent.sockets import parse_spec
from rtpagent.state import OffloadState
from rtpagent.switchport import SwitchUp

pytestmark = pytest.mark.timeout(120)


def _t(text: object) -> float:
    return datetime.fromisoformat(str(text)).timestamp()


def _during(at: object, span: tuple[float, float]) -> None:
    """`at` falls within the span of the command that did it (a command's
    time, not when someone noticed; a loaded host may stretch the span)."""
    assert span[0] - 0.05 <= _t(at) <= span[1] + 0.05, (at, span)


def _last_reports(app: App) -> dict[str, dict[str, Any]]:
    """Each session's latest report in the spool."""
    app.store.flush()
    out: dict[str, dict[str, Any]] = {}
    for _, kind, d in app.store.spool_head(100000):
        if kind == "session":
            out[str(d["session_key"])] = d
    return out


def _seen(app: App, leg: int) -> int:
    """The packets the agent last read from a leg's counter."""
    c = app.offloader.installed.seen.get(leg)
    return c.counters.packets if c is not None else 0


def _accounted(path: str) -> set[str]:
    """Call-IDs of the sessions RTPProxy's accounting has rows for."""
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        return set()
    return {row.get("call_id") or "" for row in csv.DictReader(io.StringIO(text))}


def _events(app: App, kind: str) -> list[dict[str, Any]]:
    app.store.flush()
    return [d for _, k, d in app.store.spool_head(100000) if k == "event" and d["type"] == kind]


class _Bed:
    """RTPProxy in its own process and the agent's settings around it."""

    def __init__(self, tmp: Path, **kw: Any) -> None:
        self.port = free_udp_pair()
        notify = free_port()
        self.rtpp = RtpproxyProcess(
            self.port + 1, "127.0.0.1", "37000-37999", ["-T", "60", "-n", f"tcp:127.0.0.1:{notify}"]
        )
        self.kw: dict[str, Any] = dict(
            port=self.port,
            rtpproxy=f"udp:127.0.0.1:{self.port + 1}",
            notify_listen=f"tcp:127.0.0.1:{notify}",
            relay_ports="37000-37999",
            rtpproxy_acct=self.rtpp.acct,
            **kw,
        )
        self.tmp = tmp

    def app(self, **switch: Any) -> App:
        return App(settings(self.tmp, **self.kw), **switch)


async def test_commands_before_the_agent_is_loaded_are_relayed_and_learnt(
    tmp_path: Path,
) -> None:
    """The control socket the process opens first (early.py) relays a call's
    offer and answer; the agent, once loaded, takes the socket over, knows
    the call (answered when its answer was) and offloads it."""
    bed = _Bed(tmp_path, switch="fake:1")
    bed.rtpp.start()
    relay = EarlyRelay([parse_spec(f"udp:127.0.0.1:{bed.port}")], parse_spec(bed.kw["rtpproxy"]))
    relay.start()
    cl = Client(bed.port)
    fake = FakeSwitch()
    try:
        assert await cl.cmd("V") == "20040107\n"
        assert await cl.cmd("U early 198.18.1.10 6000 f;1")
        before_answer = time.time()
        assert await cl.cmd("L early 198.18.2.10 7000 f;1 t;1")
        after_answer = time.time()
        app = bed.app(switch=fake, early=relay)
        await app.start()
        try:
            assert app.passed_through == 3
            (s,) = list(app.table)
            assert s.call_id == "early" and s.to_tag == "t;1"
            assert s.answered_at is not None and before_answer <= s.answered_at <= after_answer
            await wait_for(lambda: len(fake.relays) == 4)  # offloaded like any call
            assert await cl.cmd("D early f t") == "0\n"  # the same socket, the agent's now
            await wait_for(lambda: not fake.relays)
        finally:
            await app.stop()
    finally:
        cl.close()
        bed.rtpp.stop()


def test_early_settings_follow_the_agents_precedence(tmp_path: Path) -> None:
    cfg = tmp_path / "a.toml"
    cfg.write_text('[rtpagent]\nlisten = ["udp:127.0.0.1:1"]\nrtpproxy = "udp:127.0.0.1:2"\n')
    assert settings_for(["--config", str(cfg)]) == (["udp:127.0.0.1:1"], "udp:127.0.0.1:2")
    assert settings_for(["--config", str(cfg), "--rtpproxy=udp:127.0.0.1:3"]) == (
        ["udp:127.0.0.1:1"],
        "udp:127.0.0.1:3",
    )
    assert settings_for(["--check-config"]) is None
    assert settings_for(["--config", str(tmp_path / "missing.toml")]) is None


def test_acct_file_follows_rows_rotation_and_bad_input(tmp_path: Path) -> None:
    head = (
        "rec_ver,call_id,from_tag,setup_ts,teardown_ts,first_rtp_ts_ino,last_rtp_ts_ino,"
        "first_rtp_ts_ina,last_rtp_ts_ina,rtp_npkts_ina,rtp_npkts_ino,rtp_nrelayed,rtcp_nrelayed\n"
    )

    def row(call: str, relayed: int = 10) -> str:
        return f"1.2,{call},f;1,100.0,110.0,101.0,109.5,100.5,109.8,6,4,{relayed},0\n"

    path = tmp_path / "acct.csv"
    path.write_text(head + row("old"))
    f = AcctFile(str(path), None)
    assert f.read() == []  # a first run: rows already there are older than the agent
    with path.open("a") as fh:
        fh.write(row("a") + "1.2,bad,row\n" + row("b")[:20])  # a bad row, a partial one
    got = f.read()
    assert [r.call_id for r in got] == ["a"]
    assert got[0].media_stopped == 109.8 and got[0].relayed_by_stream() == (4, 6)
    with path.open("a") as fh:
        fh.write(row("b")[20:])
    assert [r.call_id for r in f.read()] == ["b"]  # the line completed
    path.write_text(head + row("c"))  # rotated: a new, shorter file
    assert [r.call_id for r in f.read()] == ["c"]
    f2 = AcctFile(str(path), f.offset)  # a restart goes on from the journalled offset
    with path.open("a") as fh:
        fh.write(row("d"))
    assert [r.call_id for r in f2.read()] == ["d"]


async def test_ends_missed_and_calls_placed_while_away_are_recorded(tmp_path: Path) -> None:
    """While the agent is away the SIP server talks to RTPProxy directly (the
    second node of its set): a call the agent knew ends there, another is
    placed and ended there, a third is placed there and ends through the
    restarted agent. RTPProxy's accounting gives the restarted agent each
    end (not when it noticed), and the calls it never saw are recorded
    whole with their reason and RTPProxy's packets."""
    bed = _Bed(tmp_path, switch="fake:1")
    bed.rtpp.start()
    fake = FakeSwitch()
    cl, direct = Client(bed.port), Client(bed.port + 1)
    try:
        app1 = bed.app(switch=fake)
        await app1.start()
        assert await cl.cmd("U known 198.18.1.10 6000 f;1")
        assert await cl.cmd("L known 198.18.2.10 7000 f;1 t;1")
        await wait_for(lambda: len(fake.relays) == 4)
        await app1.stop()

        # The agent is away: RTPProxy directly.
        before = time.time()
        assert await direct.cmd("D known f t") == "0\n"
        known_end = (before, time.time())
        before = time.time()
        assert await direct.cmd("U away 198.18.1.10 6100 f;1")
        assert await direct.cmd("L away 198.18.2.10 7100 f;1 t;1")
        away_start = (before, time.time())
        before = time.time()
        assert await direct.cmd("D away f t") == "0\n"
        away_end = (before, time.time())
        assert await direct.cmd("U still 198.18.1.10 6200 f;1")
        assert await direct.cmd("L still 198.18.2.10 7200 f;1 t;1")
        # RTPProxy has accounted both ends (its accounting is written apart
        # from the command's answer) ...
        await wait_for(lambda: {"known", "away"} <= _accounted(bed.rtpp.acct), within=5.0)
        # ... and the agent stays away a while (the scenario): an end taken as
        # when the restarted agent noticed it would fall outside the command's
        # span the checks below allow.
        await asyncio.sleep(0.5)

        app2 = bed.app(switch=fake)
        await app2.start()
        try:
            assert not list(app2.table)  # the known call's end was read at start
            before = time.time()
            assert await cl.cmd("D still f t") == "0\n"  # through the agent, back again
            still_end = (before, time.time())

            def recorded() -> bool:
                r = _last_reports(app2)
                return all(
                    r.get(k, {}).get("state") == "ended"
                    for k in ("known;f;1", "away;f;1", "still;f;1")
                )

            await wait_for(recorded, within=10.0, interval=0.1)
            r = _last_reports(app2)
            _during(r["known;f;1"]["ended_at"], known_end)
            _during(r["away;f;1"]["ended_at"], away_end)
            _during(r["away;f;1"]["started_at"], away_start)
            _during(r["still;f;1"]["ended_at"], still_end)
            for k in ("away;f;1", "still;f;1"):
                assert r[k]["offload_reason"] == "agent_away" and not r[k]["offloaded"]
            reasons = {
                (e["session_key"], e["payload"]["reason"]) for e in _events(app2, "fallback")
            }
            assert {("away;f;1", "agent_away"), ("still;f;1", "agent_away")} <= reasons
            assert not fake.relays  # the known call's entries went with it
        finally:
            await app2.stop()
    finally:
        cl.close()
        direct.close()
        bed.rtpp.stop()


async def test_lost_accounting_rows_are_counted_and_every_session_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """RTPProxy drops a row when its accounting queue (128 rows) is full. An
    ended session whose row does not come is counted and logged, and the agent
    asks RTPProxy about every session it holds: one ended behind its back (its
    row lost as well) is ended then, not a TTL later. Rows that come are not
    counted missing."""
    monkeypatch.setattr(app_module, "ACCT_ROW_WAIT_S", 0.5)

    def metric(name: str, **labels: str) -> float:
        return REGISTRY.get_sample_value(name, labels) or 0.0

    missing0 = metric("rtpagent_rtpproxy_acct_missing_total")
    rechecks0 = metric("rtpagent_rtpproxy_acct_rechecks_total")
    bed = _Bed(tmp_path, switch="fake:1")
    # The agent follows a file RTPProxy never writes: every row is lost.
    lost = tmp_path / "lost_acct.csv"
    lost.write_text("rec_ver,call_id,from_tag,setup_ts,teardown_ts\n")
    bed.kw["rtpproxy_acct"] = str(lost)
    bed.rtpp.start()
    fake = FakeSwitch()
    cl, direct = Client(bed.port), Client(bed.port + 1)
    try:
        app = bed.app(switch=fake)
        await app.start()
        try:
            for i, c in enumerate(("ends", "behind")):
                assert await cl.cmd(f"U {c} 198.18.1.10 {6000 + 2 * i} f;1")
                assert await cl.cmd(f"L {c} 198.18.2.10 {7000 + 2 * i} f;1 t;1")
            await wait_for(lambda: len(fake.relays) == 8)
            assert await direct.cmd("D behind f t") == "0\n"  # the agent is not told
            assert await cl.cmd("D ends f t") == "0\n"
            await wait_for(
                lambda: metric("rtpagent_rtpproxy_acct_missing_total") > missing0, within=5.0
            )
            # The pass runs as its own task, just after the count.
            await wait_for(lambda: metric("rtpagent_rtpproxy_acct_rechecks_total") > rechecks0)
            await wait_for(lambda: not list(app.table), within=5.0)  # 'behind' found gone
        finally:
            await app.stop()

        # RTPProxy's own file: the row comes, nothing is missing.
        bed.kw["rtpproxy_acct"] = bed.rtpp.acct
        bed.tmp = tmp_path / "second"
        bed.tmp.mkdir()
        app = bed.app(switch=fake)
        await app.start()
        try:
            assert await cl.cmd("U kept 198.18.1.10 6010 f;1")
            assert await cl.cmd("L kept 198.18.2.10 7010 f;1 t;1")
            before = metric("rtpagent_rtpproxy_acct_missing_total")
            read = metric("rtpagent_rtpproxy_acct_rows_total", result="read")
            assert await cl.cmd("D kept f t") == "0\n"
            await wait_for(
                lambda: metric("rtpagent_rtpproxy_acct_rows_total", result="read") > read,
                within=5.0,
            )
            await asyncio.sleep(2 * app_module.ACCT_ROW_WAIT_S)  # the row's wait, over
            await wait_for(lambda: not app._awaited, within=5.0)
            assert metric("rtpagent_rtpproxy_acct_missing_total") == before
        finally:
            await app.stop()
    finally:
        cl.close()
        direct.close()
        bed.rtpp.stop()


async def test_answer_time_survives_a_restart(tmp_path: Path) -> None:
    """`answered_at` is the answer's, journalled: a call answered before a
    restart and ended after it is not reported answered at its end."""
    bed = _Bed(tmp_path, switch="fake:1")
    bed.rtpp.start()
    fake = FakeSwitch()
    cl = Client(bed.port)
    try:
        app1 = bed.app(switch=fake)
        await app1.start()
        assert await cl.cmd("U ans 198.18.1.10 6000 f;1")
        before = time.time()
        assert await cl.cmd("L ans 198.18.2.10 7000 f;1 t;1")
        answer = (before, time.time())
        await wait_for(lambda: len(fake.relays) == 4)
        await app1.stop()
        # The call goes on through the restart (the scenario): an answer time
        # taken at the restart would be a second late.
        await asyncio.sleep(1.0)
        app2 = bed.app(switch=fake)
        await app2.start()
        try:
            assert await cl.cmd("D ans f t") == "0\n"
            await wait_for(
                lambda: _last_reports(app2).get("ans;f;1", {}).get("state") == "ended", within=5.0
            )
            doc = _last_reports(app2)["ans;f;1"]
            _during(doc["answered_at"], answer)
            assert _t(doc["ended_at"]) - _t(doc["answered_at"]) > 0.9
        finally:
            await app2.stop()
    finally:
        cl.close()
        bed.rtpp.stop()


async def test_switch_restart_loses_no_packet_and_waits_for_no_timer(tmp_path: Path) -> None:
    """The switch restarts empty and gets its routes back after the agent
    reconnected: the call falls back to RTPProxy (no route to bind it to),
    is offloaded again as soon as the route is there (not at the next
    periodic route read), and its record holds the packets counted before
    the restart (the last read carried on at the leg's rate to when the
    switch was lost) as well as after."""
    bed = _Bed(tmp_path, switch="fake:1", route_refresh_s=60.0, sample_interval=0.1)
    bed.rtpp.start()
    fake = FakeSwitch()
    cl = Client(bed.port)
    try:
        app = bed.app(switch=fake)
        await app.start()
        try:
            assert await cl.cmd("U sw 198.18.1.10 6000 f;1")
            assert await cl.cmd("L sw 198.18.2.10 7000 f;1 t;1")
            await wait_for(lambda: len(fake.relays) == 4)
            legs = sorted(fake.legs)
            for leg in legs:
                fake.quality[leg] = LegQuality(leg, 0, 0, 0, 0, 0, 0, 0, 0)

            async def media() -> None:  # 50 packets a second each way, as a call
                t0 = time.monotonic()
                while True:
                    n = int(50 * (time.monotonic() - t0))
                    for leg in legs:
                        fake.counters[leg] = Counters(n, 172 * n)
                    await asyncio.sleep(0.01)  # the counters' pace (the scenario)

            flowing = asyncio.ensure_future(media())
            await wait_for(lambda: all(_seen(app, g) >= 100 for g in legs), within=10.0)
            await asyncio.sleep(0.25)  # forwarded after the last read, before the switch died
            # The restart: tables and counters gone, no route yet.
            flowing.cancel()
            fake.lost_at = time.time()
            before = {leg: fake.counters[leg].packets for leg in legs}
            fake.relays.clear()
            fake.legs.clear()
            fake.guards.clear()
            fake.counters.clear()
            fake.routes = Routes()
            fake.queue.put_nowait(SwitchUp(restarted=True))
            (s,) = list(app.table)
            await wait_for(lambda: s.state is OffloadState.FALLBACK, within=5.0)
            assert s.reason == "no_ingress_route"
            fake.routes = ROUTES  # the switch's control plane restored them
            # At the agent's next route poll while calls wait for a route
            # (every 0.25 s; a loaded host may take seconds), not at the
            # periodic read 60 s away.
            await wait_for(lambda: len(fake.relays) == 4, within=20.0)
            for leg in fake.legs:
                fake.counters[leg] = Counters(50, 8600)
            assert await cl.cmd("D sw f t") == "0\n"
            await wait_for(
                lambda: _last_reports(app).get("sw;f;1", {}).get("state") == "ended", within=5.0
            )
            got = _last_reports(app)["sw;f;1"]["packets"]
            want = sum(before.values()) + 2 * 50
            assert abs(got - want) <= 4, (got, want)  # carried on to when the switch was lost
        finally:
            await app.stop()
    finally:
        cl.close()
        bed.rtpp.stop()


async def test_media_stopped_while_away_ends_the_call(tmp_path: Path) -> None:
    """A call whose `D` was lost while the agent was away stays in RTPProxy;
    its entries aged on the switch meanwhile (time left 0), an idle timeout
    nobody heard. The restarted agent ends it as that timeout would: RTPProxy's
    session deleted, the record ended when the leg counters say the media
    stopped (read now against the last read before, at the leg's rate)."""
    bed = _Bed(tmp_path, switch="fake:1", idle_ttl_ms=2000, sample_interval=0.1)
    bed.rtpp.start()
    fake = FakeSwitch()
    cl = Client(bed.port)
    try:
        app1 = bed.app(switch=fake)
        await app1.start()
        assert await cl.cmd("U lost 198.18.1.10 6000 f;1")
        assert await cl.cmd("L lost 198.18.2.10 7000 f;1 t;1")
        await wait_for(lambda: len(fake.relays) == 4)
        (s1,) = list(app1.table)
        assert s1.offloaded_at is not None
        legs = sorted(fake.legs)
        await asyncio.sleep(1.0)  # a second of media before the last read (the leg's rate)
        for leg in legs:  # 50 packets a second, each way, since the offload
            fake.counters[leg] = Counters(int(50 * (time.time() - s1.offloaded_at)), 0)
            fake.quality[leg] = LegQuality(leg, 0, 0, 0, 0, 0, 0, 0, 0)
        await wait_for(lambda: all(_seen(app1, g) for g in legs))
        read_at = time.time()
        await app1.stop()  # the last read journalled with when it was read
        for leg in legs:  # 1.5 s more after the last read, then the BYE's D was lost
            fake.counters[leg] = Counters(fake.counters[leg].packets + 75, 0)
        fake.ttl_left = dict.fromkeys(fake.relays, 0)
        await asyncio.sleep(4.0)  # the entries aged: stopped more than the TTL ago
        app2 = bed.app(switch=fake)
        await app2.start()
        try:
            await wait_for(lambda: not fake.relays, within=5.0)
            await wait_for(
                lambda: _last_reports(app2).get("lost;f;1", {}).get("state") == "ended", within=5.0
            )
            ended = _t(_last_reports(app2)["lost;f;1"]["ended_at"])
            assert abs(ended - (read_at + 1.5)) < 0.6, ended - read_at
            assert (await Client(bed.port + 1).cmd("Q lost f;1 t;1") or "").startswith("E")
        finally:
            await app2.stop()
    finally:
        cl.close()
        bed.rtpp.stop()
