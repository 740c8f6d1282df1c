"""Offload, re-INVITE, teardown, R/C/P take-back, fail-open: real RTPProxy + real softswitch."""

from __future__ import annotations

import ipaddress
from pathlib import Path

from harness import Client, route_all, running_agent, settings
from p4relay_switch import SwitchClient
from p4relay_switch.codec import ReadValue
from p4relay_testsupport import Softswitch, softswitch, wait_for
from rtpagent.state import OffloadState


def _int(v: object) -> int:
    """A key or data field read back: every field these tables hold is an integer."""
    assert isinstance(v, int), v
    return v


def _addr(v: object) -> str:
    return str(ipaddress.IPv4Address(_int(v)))


async def relays(c: SwitchClient) -> dict[tuple[str, str, int, int], dict[str, ReadValue]]:
    out = {}
    for e in await c.read("pipe.Ingress.relay"):
        k = e.key
        out[
            (
                _addr(k["hdr.ipv4.src_addr"]),
                _addr(k["hdr.ipv4.dst_addr"]),
                _int(k["hdr.udp.src_port"]),
                _int(k["hdr.udp.dst_port"]),
            )
        ] = dict(e.data)
    return out


async def guards(c: SwitchClient) -> set[tuple[str, int]]:
    return {
        (_addr(e.key["hdr.ipv4.dst_addr"]), _int(e.key["hdr.udp.dst_port"]))
        for e in await c.read("pipe.Ingress.relay_guard")
    }


async def legs(c: SwitchClient) -> dict[int, dict[str, ReadValue]]:
    return {
        _int(e.key["ig_md.leg"]): dict(e.data) for e in await c.read("pipe.Ingress.leg_rewrite")
    }


async def test_call_offloaded_and_removed(
    tmp_path: Path, sw: Softswitch, probe: SwitchClient
) -> None:
    cfg = settings(tmp_path, switch=sw.address)
    async with running_agent(cfg) as app:
        cl = Client(int(cfg.listen[0].rsplit(":", 1)[1]))
        r_u = await cl.cmd("Uc0,8 call1 198.18.1.10 6000 ftag;1")
        assert r_u is not None
        port_b, addr = r_u.split()
        assert addr == "127.0.0.1"
        r_l = await cl.cmd("L call1 198.18.2.10 7000 ftag;1 ttag;1")
        assert r_l is not None
        port_a = int(r_l.split()[0])
        await wait_for(lambda: app.offloader.plans)
        got = await relays(probe)
        # caller -> the port it was given (answer), callee -> the offer's port; RTCP +1.
        assert ("198.18.1.10", "127.0.0.1", 6000, port_a) in got
        assert ("198.18.1.10", "127.0.0.1", 6001, port_a + 1) in got
        assert ("198.18.2.10", "127.0.0.1", 7000, int(port_b)) in got
        assert ("198.18.2.10", "127.0.0.1", 7001, int(port_b) + 1) in got
        assert len(got) == 4
        # Both sides' relay ports (RTP, RTCP) guarded against other sources.
        pb = int(port_b)
        assert await guards(probe) == {("127.0.0.1", p) for p in (port_a, port_a + 1, pb, pb + 1)}
        lg = await legs(probe)
        assert len(lg) == 2
        caller_leg = got[("198.18.1.10", "127.0.0.1", 6000, port_a)]["leg"]
        rw = lg[_int(caller_leg)]
        assert _addr(rw["dst_addr"]) == "198.18.2.10"
        assert rw["dst_port"] == 7000 and rw["src_port"] == int(port_b)
        # Q answered (RTPProxy's format, the switch's counts added).
        q = await cl.cmd("Q call1 ftag;1 ttag;1")
        assert q is not None and len(q.split()) == 5
        # D: reply passes through; entries go.
        assert await cl.cmd("D call1 ftag ttag") == "0\n"
        await wait_for(lambda: not app.offloader.plans)
        assert await relays(probe) == {}
        assert await legs(probe) == {}
        assert await guards(probe) == set()
        assert len(app.table) == 0
        cl.close()


async def test_reinvite_rekeys(tmp_path: Path, sw: Softswitch, probe: SwitchClient) -> None:
    cfg = settings(tmp_path, switch=sw.address)
    async with running_agent(cfg) as app:
        cl = Client(int(cfg.listen[0].rsplit(":", 1)[1]))
        await cl.cmd("U call2 198.18.1.10 6000 f1;1")
        await cl.cmd("L call2 198.18.2.10 7000 f1;1 t1;1")
        await wait_for(lambda: app.offloader.plans)
        # Callee re-INVITE (tags swapped) moves its media to 7100.
        r = await cl.cmd("U call2 198.18.2.10 7100 t1;1 f1;1")
        assert r is not None and r.split()[0].isdigit()
        await cl.cmd("L call2 198.18.1.10 6000 t1;1 f1;1")
        await wait_for(
            lambda: any(k[2] == 7100 for _, p in app.offloader.offloaded() for k in p.flow_keys())
        )
        await app.offloader.drained()
        got = await relays(probe)
        assert len(got) == 4
        assert {k[2] for k in got} == {6000, 6001, 7100, 7101}
        lg = await legs(probe)
        assert sorted(_int(v["dst_port"]) for v in lg.values()) == [6000, 7100]
        s = next(iter(app.table))
        assert s.state is OffloadState.OFFLOADED
        await cl.cmd("D call2 f1 t1")
        await wait_for(lambda: not app.offloader.plans)
        assert await relays(probe) == {}
        cl.close()


async def test_record_takes_back_and_norecord_returns(
    tmp_path: Path, sw: Softswitch, probe: SwitchClient
) -> None:
    cfg = settings(tmp_path, switch=sw.address, embedded_args=["-r", str(tmp_path)])
    async with running_agent(cfg) as app:
        cl = Client(int(cfg.listen[0].rsplit(":", 1)[1]))
        await cl.cmd("U call3 198.18.1.10 6000 f;1")
        await cl.cmd("L call3 198.18.2.10 7000 f;1 t;1")
        await wait_for(lambda: app.offloader.plans)
        r = await cl.cmd("R call3 f t")
        assert r == "0\n", r
        await wait_for(lambda: not app.offloader.plans)
        assert await relays(probe) == {}
        assert await guards(probe) == set()  # RTPProxy carries it again: nothing dropped
        s = next(iter(app.table))
        assert s.state is OffloadState.HELD and s.reason == "recording"
        assert await cl.cmd("N call3 f t") == "0\n"
        await wait_for(lambda: app.offloader.plans)
        assert len(await relays(probe)) == 4
        assert len(await guards(probe)) == 4
        # Repacketising (z) never goes to the switch.
        await cl.cmd("Uz20 call4 198.18.1.11 6000 g;1")
        await cl.cmd("L call4 198.18.2.11 7000 g;1 h;1")
        await app.offloader.drained()
        s4 = next(s for s in app.table if s.call_id == "call4")
        assert s4.state is OffloadState.HELD and s4.reason == "repacketising"
        # X removes every entry.
        assert await cl.cmd("X") == "0\n"
        await wait_for(lambda: not app.offloader.plans)
        assert await relays(probe) == {} and await legs(probe) == {}
        assert await guards(probe) == set()
        cl.close()


async def test_fail_open_switch_unreachable(tmp_path: Path) -> None:
    from p4relay_testsupport import free_port

    cfg = settings(tmp_path, switch=f"127.0.0.1:{free_port()}")
    async with running_agent(cfg) as app:
        cl = Client(int(cfg.listen[0].rsplit(":", 1)[1]))
        r = await cl.cmd("U call5 198.18.1.10 6000 f;1")
        assert r is not None and r.split()[0].isdigit()
        r = await cl.cmd("L call5 198.18.2.10 7000 f;1 t;1")
        assert r is not None and r.split()[0].isdigit()
        await app.offloader.drained()
        s = next(iter(app.table))
        assert s.state is OffloadState.FALLBACK and s.reason == "switch_unreachable"
        assert await cl.cmd("D call5 f t") == "0\n"
        cl.close()


async def test_fail_open_table_full(tmp_path: Path, probe: SwitchClient) -> None:
    with softswitch(["--relay-entries", "4"]) as small:
        await route_all(small.address)
        cfg = settings(tmp_path, switch=small.address)
        async with running_agent(cfg) as app:
            cl = Client(int(cfg.listen[0].rsplit(":", 1)[1]))
            for n in (1, 2):
                await cl.cmd(f"U full{n} 198.18.1.1{n} 6000 f;1")
                await cl.cmd(f"L full{n} 198.18.2.1{n} 7000 f;1 t;1")
            await app.offloader.drained()
            states = {s.call_id: (s.state, s.reason) for s in app.table}
            assert sorted(v[0].value for v in states.values()) == ["fallback", "offloaded"], states
            assert ("fallback", "table_full") in {(v[0].value, v[1]) for v in states.values()}
            # The refused call left nothing behind: exactly one call's entries.
            sc = SwitchClient(small.address, client_id=8)
            await sc.connect()
            assert len(await relays(sc)) == 4 and len(await legs(sc)) == 2
            await sc.close()
            cl.close()


async def test_one_refused_call_in_a_batched_write_leaves_the_others(tmp_path: Path) -> None:
    """Calls changed while a write is under way go to the switch together in
    the next one; when the switch refuses one of them (its table full), that
    call alone stays on RTPProxy: the others of the same batch are offloaded
    and nothing of the refused call is left in the switch."""
    with softswitch(["--relay-entries", "12"]) as small:  # room for 3 calls' relays
        await route_all(small.address)
        cfg = settings(tmp_path, switch=small.address)
        async with running_agent(cfg) as app:
            cl = Client(int(cfg.listen[0].rsplit(":", 1)[1]))
            writer = app.offloader.writer
            async with writer.lock:  # the writer waits with call 1; calls 2-4 gather
                for n in (1, 2, 3, 4):
                    await cl.cmd(f"U batch{n} 198.18.1.1{n} 6000 f;1")
                    await cl.cmd(f"L batch{n} 198.18.2.1{n} 7000 f;1 t;1")
                gathered = {s.call_id for s in writer.dirty.values()}
                assert gathered >= {"batch2", "batch3", "batch4"}, gathered
            await app.offloader.drained()
            states = {s.call_id: (s.state, s.reason) for s in app.table}
            offloaded = (OffloadState.OFFLOADED, None)
            assert [states[f"batch{n}"] for n in (1, 2, 3)] == [offloaded] * 3, states
            assert states["batch4"] == (OffloadState.FALLBACK, "table_full"), states
            sc = SwitchClient(small.address, client_id=8)
            await sc.connect()
            try:
                assert len(await relays(sc)) == 12 and len(await legs(sc)) == 6
                assert len(await guards(sc)) == 12
            finally:
                await sc.close()
            cl.close()


async def test_fail_open_guard_table_full(tmp_path: Path) -> None:
    """Room for two calls' relays but, with another client's guards taking half
    the guard table, for one call's guards: the second call stays on RTPProxy
    and nothing of it is left in the switch."""
    from p4relay_switch import Entry
    from p4relay_switch.names import A_GUARD_DROP, RELAY_GUARD

    with softswitch(["--relay-entries", "8"]) as small:
        await route_all(small.address)
        cfg = settings(tmp_path, switch=small.address)
        sc = SwitchClient(small.address, client_id=8)
        await sc.connect()
        async with running_agent(cfg) as app:
            cl = Client(int(cfg.listen[0].rsplit(":", 1)[1]))
            for n in (1, 2):
                await cl.cmd(f"U gfull{n} 198.18.1.1{n} 6000 f;1")
                await cl.cmd(f"L gfull{n} 198.18.2.1{n} 7000 f;1 t;1")
                await wait_for(lambda: app.offloader.plans or None)
                await app.offloader.drained()
                if n == 1:  # the agent's start-up sweep is done: fill the guard table
                    other = [
                        Entry(
                            {"hdr.ipv4.dst_addr": 0x7F000009, "hdr.udp.dst_port": p},
                            A_GUARD_DROP,
                            {"leg": 0},
                        )
                        for p in range(5000, 5004)
                    ]
                    await sc.insert(RELAY_GUARD, other)
            states = {s.call_id: (s.state.value, s.reason) for s in app.table}
            assert states == {"gfull1": ("offloaded", None), "gfull2": ("fallback", "table_full")}
            assert len(await relays(sc)) == 4 and len(await legs(sc)) == 2
            assert len(await guards(sc)) == 8  # gfull1's 4 + the other client's 4
            cl.close()
        await sc.close()


async def test_switch_idle_ends_call(tmp_path: Path, sw: Softswitch) -> None:
    """No packet for the entry TTL: the softswitch reports the entries idle; the
    agent deletes the session in RTPProxy and notifies the SIP server's socket."""
    import asyncio

    from p4relay_testsupport import free_port

    got: list[bytes] = []

    async def sip_server(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        while line := await r.readline():
            got.append(line)

    port = free_port()
    srv = await asyncio.start_server(sip_server, "127.0.0.1", port)
    cfg = settings(
        tmp_path,
        switch=sw.address,
        idle_ttl_ms=1500,
        embedded_args=["-n", f"tcp:127.0.0.1:{port}"],
        notify_allow=[f"tcp:127.0.0.1:{port}"],
    )
    async with running_agent(cfg) as app:
        cl = Client(int(cfg.listen[0].rsplit(":", 1)[1]))
        await cl.cmd(f"U idle1 198.18.1.10 6000 f;1 tcp:127.0.0.1:{port} kam%3A9")
        await cl.cmd("L idle1 198.18.2.10 7000 f;1 t;1")
        await wait_for(lambda: app.offloader.plans)
        await wait_for(lambda: got, within=15.0, interval=0.1)
        assert got == [b"kam:9\n"]
        await wait_for(lambda: not app.offloader.plans)
        assert await cl.cmd("Q idle1 f;1 t;1") == "E50\n"
        cl.close()
    srv.close()
