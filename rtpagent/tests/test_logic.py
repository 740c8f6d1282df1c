"""Control-path logic with a real RTPProxy (rtp.io) and an in-memory switch."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fakeswitch import FakeSwitch, port_of
from harness import Client, settings
from p4relay_switch import Endpoint, FlowKey, GuardKey, LearnEvent
from p4relay_testsupport import wait_for
from rtpagent.app import App
from rtpagent.state import OffloadState


def learn(src: str, sport: int, dst: str, dport: int) -> LearnEvent:
    """A learn digest as the switch reports it (ingress port 1)."""
    return LearnEvent(Endpoint.of(src, sport), Endpoint.of(dst, dport), port_of(src))


async def start(tmp: Path, fake: FakeSwitch, **kw: object) -> tuple[App, Client]:
    cfg = settings(tmp, switch="fake:1", **kw)
    app = App(cfg, switch=fake)
    await app.start()
    return app, Client(int(cfg.listen[0].rsplit(":", 1)[1]))


async def test_offload_then_delete(tmp_path: Path) -> None:
    fake = FakeSwitch()
    app, cl = await start(tmp_path, fake)
    try:
        r_u = await cl.cmd("U c1 198.18.1.10 6000 ft;1")
        r_l = await cl.cmd("L c1 198.18.2.10 7000 ft;1 tt;1")
        assert r_u and r_l
        pb, pa = int(r_u.split()[0]), int(r_l.split()[0])
        await wait_for(lambda: app.offloader.plans)
        assert set(fake.relays) == {
            FlowKey("198.18.1.10", "127.0.0.1", 6000, pa, port_of("198.18.1.10")),
            FlowKey("198.18.1.10", "127.0.0.1", 6001, pa + 1, port_of("198.18.1.10")),
            FlowKey("198.18.2.10", "127.0.0.1", 7000, pb, port_of("198.18.2.10")),
            FlowKey("198.18.2.10", "127.0.0.1", 7001, pb + 1, port_of("198.18.2.10")),
        }
        assert len(fake.legs) == 2
        # Each side's relay port and port + 1 guarded: nothing else may reach RTPProxy there.
        assert fake.guards == {GuardKey("127.0.0.1", p) for p in (pa, pa + 1, pb, pb + 1)}
        assert await cl.cmd("D c1 ft tt") == "0\n"
        await wait_for(lambda: not fake.relays and not fake.legs and not fake.guards)
    finally:
        await app.stop()
        cl.close()


async def test_nat_waits_for_latch(tmp_path: Path) -> None:
    fake = FakeSwitch()
    app, cl = await start(tmp_path, fake)
    try:
        await cl.cmd("U c2 10.0.0.5 6000 ft;1")
        r_l = await cl.cmd("L c2 198.18.2.10 7000 ft;1 tt;1")
        assert r_l
        pa = int(r_l.split()[0])
        await app.offloader.drained()
        s = next(iter(app.table))
        # No guard before the latch: the first packet must reach RTPProxy.
        assert s.state is OffloadState.LEARNING and not fake.relays and not fake.guards
        fake.queue.put_nowait(learn("198.18.3.10", 40000, "127.0.0.1", pa))
        await wait_for(lambda: fake.relays)
        assert len(fake.guards) == 4
        assert FlowKey("198.18.3.10", "127.0.0.1", 40000, pa, port_of("198.18.3.10")) in fake.relays
        rewrite_to_caller = [lg for lg in fake.legs.values() if lg.dst_addr == "198.18.3.10"]
        assert rewrite_to_caller and rewrite_to_caller[0].dst_port == 40000
    finally:
        await app.stop()
        cl.close()


async def test_switch_idle_ends_call_and_notifies(tmp_path: Path) -> None:
    import asyncio

    from p4relay_testsupport import free_port

    got: list[bytes] = []

    async def sip_server(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        got.append(await r.readline())

    port = free_port()
    srv = await asyncio.start_server(sip_server, "127.0.0.1", port)
    fake = FakeSwitch()
    app, cl = await start(
        tmp_path,
        fake,
        embedded_args=["-n", f"tcp:127.0.0.1:{port}"],
        notify_allow=[f"tcp:127.0.0.1:{port}"],
    )
    try:
        await cl.cmd(f"U c3 198.18.1.10 6000 ft;1 tcp:127.0.0.1:{port} dlg%3A42")
        await cl.cmd("L c3 198.18.2.10 7000 ft;1 tt;1")
        await wait_for(lambda: fake.relays)
        fake.idle_all()
        await wait_for(lambda: got)
        assert got == [b"dlg:42\n"]
        await wait_for(lambda: not fake.relays)
        assert await cl.cmd("Q c3 ft;1 tt;1") == "E50\n"  # gone from RTPProxy too
    finally:
        await app.stop()
        cl.close()
        srv.close()


async def test_default_sip_notify_for_a_u_without_socket(tmp_path: Path) -> None:
    """A U that names no timeout socket (Kamailio's initial offer): with
    --sip-notify the SIP server still hears of the media timeout, as
    '<call-id> <from-tag>' (the dialog's from-tag, media number dropped)."""
    import asyncio

    from p4relay_testsupport import free_port

    got: list[bytes] = []

    async def sip_server(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        got.append(await r.readline())

    port = free_port()
    srv = await asyncio.start_server(sip_server, "127.0.0.1", port)
    fake = FakeSwitch()
    app, cl = await start(tmp_path, fake, sip_notify=f"tcp:127.0.0.1:{port}")
    try:
        await cl.cmd("U c4@host 198.18.1.10 6000 fx9;1")
        await cl.cmd("L c4@host 198.18.2.10 7000 fx9;1 ty;1")
        await wait_for(lambda: fake.relays)
        fake.idle_all()
        await wait_for(lambda: got)
        assert got == [b"c4@host fx9\n"]
    finally:
        await app.stop()
        cl.close()
        srv.close()


async def test_query_and_samples_reflect_switch_counters(tmp_path: Path) -> None:
    from p4relay_switch import Counters, LegQuality

    fake = FakeSwitch()
    app, cl = await start(tmp_path, fake)
    try:
        await cl.cmd("Uc8 c4 198.18.1.10 6000 ft;1")
        r_l = await cl.cmd("L c4 198.18.2.10 7000 ft;1 tt;1")
        assert r_l
        pa = int(r_l.split()[0])
        await wait_for(lambda: fake.relays)
        caller_key = FlowKey("198.18.1.10", "127.0.0.1", 6000, pa, port_of("198.18.1.10"))
        leg = fake.relays[caller_key].leg
        fake.quality[leg] = LegQuality(leg, 50, 2, 0, 0, 0, 16 * 8, 0, 8)
        fake.counters[leg] = Counters(50, 8600)
        # Q from the caller's side: npkts_ina counts the caller's packets.
        q = await cl.cmd("Q c4 ft;1 tt;1")
        assert q is not None
        _ttl, ina, ino, relayed, _dropped = (int(x) for x in q.split())
        assert (ina, ino, relayed) == (50, 0, 50)
        qv = await cl.cmd("Qv c4 ft;1 tt;1 npkts_ina nrelayed")
        assert qv == "npkts_ina=50 nrelayed=50\n"

        # `I` and `G` add what the switch carried (sampled every second).
        async def info_counts() -> bool:
            i = await cl.cmd("I")
            g = await cl.cmd("G npkts_rcvd")
            return i is not None and "packets received: 50" in i and g == "50\n"

        await wait_for(info_counts, within=5.0, interval=0.2)

        # One quality sample for the direction with traffic, codec from `c8`.
        # The background flush may be writing it from its thread right now.
        def sampled() -> list[dict[str, Any]]:
            app.store.flush()
            return [d for _, k, d in app.store.spool_head(1000) if k == "sample" and d["packets"]]

        await wait_for(sampled, within=5.0, interval=0.1)
        samples = sampled()
        assert len(samples) == 1, samples
        sm = samples[0]
        assert sm["direction"] == "caller_to_callee" and sm["packets"] == 50 and sm["lost"] == 2
        assert sm["codec"] == "PCMA" and abs(sm["jitter_ms"] - 1.0) < 1e-6
        # An interval without packets after media flowed is reported (a gap),
        # a direction that never carried any is not.
        assert await app.sampler.sample() == 1

        def gap_sampled() -> bool:
            app.store.flush()
            last = [d for _, k, d in app.store.spool_head(1000) if k == "sample"][-1]
            return (last["direction"], last["packets"]) == ("caller_to_callee", 0)

        await wait_for(gap_sampled, within=5.0, interval=0.1)
        # D reads the final counters into the ended session's report.
        assert await cl.cmd("D c4 ft tt") == "0\n"
        await wait_for(lambda: not fake.relays)

        def ended() -> list[dict[str, Any]]:
            app.store.flush()
            return [
                d
                for _, k, d in app.store.spool_head(1000)
                if k == "session" and d["state"] == "ended"
            ]

        await wait_for(ended, within=5.0, interval=0.1)
        assert ended()[-1]["packets"] == 50
    finally:
        await app.stop()
        cl.close()


async def test_guard_table_full_stays_on_rtpproxy(tmp_path: Path) -> None:
    fake = FakeSwitch()
    fake.guard_capacity = 6  # room for one call's 4 guards, not two calls'
    app, cl = await start(tmp_path, fake)
    try:
        for n in (1, 2):
            await cl.cmd(f"U g{n} 198.18.1.1{n} 6000 f;1")
            await cl.cmd(f"L g{n} 198.18.2.1{n} 7000 f;1 t;1")
            await app.offloader.drained()
        states = {s.call_id: (s.state, s.reason) for s in app.table}
        assert states["g1"] == (OffloadState.OFFLOADED, None), states
        assert states["g2"] == (OffloadState.FALLBACK, "table_full"), states
        # Nothing of the refused call stays: one call's relays, legs and guards.
        assert (len(fake.relays), len(fake.legs), len(fake.guards)) == (4, 2, 4)
    finally:
        await app.stop()
        cl.close()


async def test_foreign_sources_counted_and_reported(tmp_path: Path) -> None:
    from prometheus_client import REGISTRY

    def metric(name: str) -> float:
        return REGISTRY.get_sample_value(name) or 0.0

    fake = FakeSwitch()
    app, cl = await start(tmp_path, fake, latch_always=True)
    try:
        await cl.cmd("U f1 198.18.1.10 6000 ft;1")
        r_l = await cl.cmd("L f1 198.18.2.10 7000 ft;1 tt;1")
        assert r_l
        pa = int(r_l.split()[0])  # the caller sends here
        s = next(iter(app.table))
        pb = s.streams[0].port
        assert pb is not None
        fake.queue.put_nowait(learn("198.18.1.10", 6000, "127.0.0.1", pa))
        fake.queue.put_nowait(learn("198.18.2.10", 7000, "127.0.0.1", pb))
        await wait_for(lambda: fake.guards)
        seen0 = metric("rtpagent_guard_foreign_sources_total")
        dropped0 = metric("rtpagent_guard_dropped_packets_total")
        # A stranger on the RTP port, and on the RTCP port; the caller's own
        # RTCP from another port (NAT) is a latch, not a stranger.
        for d in (
            learn("198.18.9.66", 4000, "127.0.0.1", pa),
            learn("198.18.9.66", 4001, "127.0.0.1", pa + 1),
            learn("198.18.1.10", 6003, "127.0.0.1", pa + 1),
        ):
            fake.queue.put_nowait(d)
        await wait_for(lambda: s.streams[1].learned_rtcp is not None)
        assert s.foreign_sources == ["198.18.9.66:4000", "198.18.9.66:4001"]
        assert metric("rtpagent_guard_foreign_sources_total") - seen0 == 2
        assert s.streams[1].learned_rtcp is not None
        assert s.streams[1].learned_rtcp.key() == ("198.18.1.10", 6003)
        # Both of the caller-facing ports count on the caller's leg.
        leg = fake.guard_legs[GuardKey("127.0.0.1", pa)]
        assert fake.guard_legs[GuardKey("127.0.0.1", pa + 1)] == leg
        assert leg == fake.relays[next(k for k in fake.relays if k.dst_port == pa)].leg
        fake.guard_drops[leg] = 42
        assert await cl.cmd("D f1 ft tt") == "0\n"
        await wait_for(lambda: not fake.guards)
        assert s.switch_totals.foreign_dropped == 42
        assert metric("rtpagent_guard_dropped_packets_total") - dropped0 == 42
        app.store.flush()
        removed = [
            d
            for _, kind, d in app.store.spool_head(1000)
            if kind == "event" and d["type"] == "offload_removed"
        ]
        assert removed[-1]["payload"]["foreign_packets_dropped"] == 42
        assert removed[-1]["payload"]["foreign_sources"] == s.foreign_sources
    finally:
        await app.stop()
        cl.close()


async def test_reused_relay_port_takes_the_guard_over() -> None:
    """RTPProxy picks ports at random: a port freed by D may go to the next
    call before the ended call's removal reached the switch. The new call
    takes the guard over (its stale copy deleted first, at once), and the old
    call's removal must not delete the new call's guard."""
    from rtpagent.offload import Offloader
    from rtpagent.state import Endpoint, Session, SessionTable, Stream

    fake = FakeSwitch()
    table = SessionTable()
    off = Offloader(table, fake)
    off.start()
    await off.refresh_routes()

    def call(cid: str, port0: int, port1: int, n: int) -> Session:
        s = Session(cid, "f;1", to_tag="t;1")
        s.streams = [
            Stream(port=port0, laddr="127.0.0.1", sdp=Endpoint(f"198.18.2.{n}", 7000)),
            Stream(port=port1, laddr="127.0.0.1", sdp=Endpoint(f"198.18.1.{n}", 6000)),
        ]
        table.add(s)
        off.touch(s)
        return s

    def guards(*ports: int) -> set[GuardKey]:
        return {GuardKey("127.0.0.1", p) for q in ports for p in (q, q + 1)}

    try:
        a = call("a", 36000, 36002, 10)
        await off.drained()
        assert fake.guards == guards(36000, 36002)
        table.remove(a)
        off.end(a)  # its removal waits for the reaper's batch (~20 ms) ...
        b = call("b", 36000, 36010, 20)  # ... and RTPProxy already gave 36000 to b
        await off.drained()
        assert b.state is OffloadState.OFFLOADED, (b.state, b.reason)
        assert fake.guards == guards(36000, 36010)
        assert {off.guards.owner(g) for g in fake.guards} == {b.uid}
        assert {k.dst_port for k in fake.relays} == {36000, 36001, 36010, 36011}
        # Port reused before the new call could be installed: the stale guard
        # goes at once (the new call's first packets must reach RTPProxy).
        c = Session("c", "f;1", to_tag="t;1")
        c.streams = [Stream(port=36010, laddr="127.0.0.1"), Stream()]
        table.remove(b)
        off.end(b)
        table.add(c)
        off.touch(c)
        await off.drained()
        assert fake.guards == set() and len(off.guards) == 0
    finally:
        await off.stop()
