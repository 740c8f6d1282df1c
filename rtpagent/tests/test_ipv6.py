"""IPv6 and bridged calls: real RTPProxy (dual stack, or bridging IPv4 and
IPv6 with `-l addr4 -6 /addr6`) behind the agent, the real softswitch."""

from __future__ import annotations

import functools
import ipaddress
from pathlib import Path

from fakeswitch import FakeSwitch
from harness import Client, running_agent, settings
from p4relay_switch import Endpoint as SwEndpoint
from p4relay_switch import FlowKey, LearnEvent, Pipeline, SwitchClient, names
from p4relay_switch.names import K6_SRC_ADDR, K_BOUND_PORT, K_DST_PORT, K_SRC_PORT
from p4relay_testsupport import Softswitch, wait_for
from prometheus_client import REGISTRY
from rtpagent.app import App
from rtpagent.offload import Offloader
from rtpagent.planner import PortBinding
from rtpagent.state import Endpoint, OffloadState, Session, SessionTable, Stream


def _fallbacks(reason: str) -> float:
    return REGISTRY.get_sample_value("rtpagent_fallbacks_total", {"reason": reason}) or 0.0


def _settled(s: Session) -> bool:
    return s.state is not OffloadState.PENDING


def _only(app: App) -> Session:
    (s,) = list(app.table)
    return s


def _int(v: object) -> int:
    assert isinstance(v, int), v
    return v


def _v6(v: object) -> str:
    return str(ipaddress.IPv6Address(_int(v)))


async def _route_v6(address: str) -> None:
    """What the control plane does on a dual-stack switch: ::/0 by next hop 1
    (port 1, the `sw` fixture's)."""
    async with SwitchClient(address, client_id=7) as c:
        await Pipeline(c).add_routes([("::/0", 1)])


async def test_ipv6_call_offloaded_and_removed(
    tmp_path: Path, sw: Softswitch, probe: SwitchClient
) -> None:
    """`U6`/`L6` through the real RTPProxy (dual stack): the call's entries in
    the switch's IPv6 tables, bound to the route's port, guarded; `D` removes them."""
    await _route_v6(sw.address)
    cfg = settings(tmp_path, switch=sw.address, relay_addr=["127.0.0.1", "::1"])
    async with running_agent(cfg) as app:
        cl = Client(int(cfg.listen[0].rsplit(":", 1)[1]))
        r_u = await cl.cmd("U6c0,8 v6call 2001:db8:1::10 6000 f;1")
        assert r_u is not None and r_u.split()[1:] == ["::1", "6"], r_u
        r_l = await cl.cmd("L6 v6call 2001:db8:2::10 7000 f;1 t;1")
        assert r_l is not None and r_l.split()[1:] == ["::1", "6"], r_l
        port_b, port_a = int(r_u.split()[0]), int(r_l.split()[0])
        await wait_for(lambda: app.offloader.plans)
        s = _only(app)
        assert s.state is OffloadState.OFFLOADED and s.reason is None
        got = {
            (_v6(e.key[K6_SRC_ADDR]), _int(e.key[K_SRC_PORT]), _int(e.key[K_DST_PORT])): e
            for e in await probe.read(names.RELAY6)
        }
        # caller -> the answer's port, callee -> the offer's; RTCP + 1; on the route's port
        assert set(got) == {
            ("2001:db8:1::10", 6000, port_a),
            ("2001:db8:1::10", 6001, port_a + 1),
            ("2001:db8:2::10", 7000, port_b),
            ("2001:db8:2::10", 7001, port_b + 1),
        }
        assert {_int(e.key[K_BOUND_PORT]) for e in got.values()} == {1}
        assert len(await probe.read(names.RELAY_GUARD6)) == 4
        rewrites = {_v6(e.data["dst_addr"]): e.data for e in await probe.read(names.LEG_REWRITE6)}
        assert set(rewrites) == {"2001:db8:1::10", "2001:db8:2::10"}
        assert _v6(rewrites["2001:db8:2::10"]["src_addr"]) == "::1"
        assert rewrites["2001:db8:2::10"]["dst_port"] == 7000
        assert rewrites["2001:db8:2::10"]["src_port"] == port_b
        assert await probe.read(names.RELAY) == []  # nothing in the IPv4 tables
        q = await cl.cmd("Q v6call f;1 t;1")
        assert q is not None and len(q.split()) == 5, q
        assert await cl.cmd("D v6call f t") == "0\n"
        await wait_for(lambda: not app.offloader.plans)
        assert await probe.read(names.RELAY6) == []
        assert await probe.read(names.LEG_REWRITE6) == []
        assert await probe.read(names.RELAY_GUARD6) == []
        cl.close()


async def test_bridged_call_stays_on_rtpproxy_with_its_reason(
    tmp_path: Path, sw: Softswitch, probe: SwitchClient
) -> None:
    """RTPProxy bridging: the caller on IPv6 (external), the callee on IPv4
    (internal). No target rewrites a 20-byte IPv4 header into a 40-byte IPv6
    one, so RTPProxy relays it, counted under `family_bridge`."""
    cfg = settings(
        tmp_path, switch=sw.address, relay_addr=["127.0.0.1", "::1"], embedded_args=["-6", "/::1"]
    )
    before = _fallbacks("family_bridge")
    async with running_agent(cfg) as app:
        cl = Client(int(cfg.listen[0].rsplit(":", 1)[1]))
        # `e` then `i`: the caller's side external (IPv6), the callee's internal (IPv4).
        r_u = await cl.cmd("Uei6 br1 2001:db8:1::10 6000 f;1")
        assert r_u is not None and r_u.split()[1] == "127.0.0.1", r_u
        r_l = await cl.cmd("Lie br1 198.18.2.10 7000 f;1 t;1")
        assert r_l is not None and r_l.split()[1:] == ["::1", "6"], r_l
        await wait_for(lambda: _only(app).state is OffloadState.FALLBACK)
        s = _only(app)
        assert s.reason == "family_bridge"
        assert [st.laddr for st in s.streams] == ["127.0.0.1", "::1"]
        assert _fallbacks("family_bridge") == before + 1
        await app.offloader.drained()
        assert await probe.read("pipe.Ingress.relay") == []
        # RTPProxy keeps the call: Q answers it, D ends it.
        q = await cl.cmd("Q br1 f;1 t;1")
        assert q is not None and not q.startswith("E"), q
        assert await cl.cmd("D br1 f t") == "0\n"
        await wait_for(lambda: len(app.table) == 0)
        cl.close()


async def test_bad_ipv6_input_is_refused_clearly_and_loses_nothing(
    tmp_path: Path, sw: Softswitch, probe: SwitchClient
) -> None:
    """Malformed addresses get RTPProxy's own error, the family the command
    does not name too; link-local, scoped and IPv4-mapped parties, which
    RTPProxy takes, stay on RTPProxy with their reason."""
    cfg = settings(tmp_path, switch=sw.address, relay_addr=["127.0.0.1", "::1"])
    async with running_agent(cfg) as app:
        cl = Client(int(cfg.listen[0].rsplit(":", 1)[1]))
        for cmd in (
            "U6 bad1 2001:db8::zz 6000 f;1",  # not an address
            "U bad2 2001:db8::10 6000 f;1",  # IPv6 without `6`
            "U6 bad3 198.18.1.10 6000 f;1",  # IPv4 with `6`
        ):
            r = await cl.cmd(cmd)
            assert r is not None and r.startswith("E"), (cmd, r)
        assert len(app.table) == 0
        for n, (caller, why) in enumerate(
            (
                ("fe80::1", "ipv6_link_local"),
                ("fe80::1%eth0", "ipv6_link_local"),
                ("::ffff:198.18.1.10", "ipv4_mapped"),
            )
        ):
            call = f"odd{n}"
            r_u = await cl.cmd(f"U6 {call} {caller} 6000 f;1")
            assert r_u is not None and r_u.split()[1:] == ["::1", "6"], r_u
            r_l = await cl.cmd(f"L6 {call} 2001:db8:2::10 7000 f;1 t;1")
            assert r_l is not None and not r_l.startswith("E"), r_l
            s = next(x for x in app.table if x.call_id == call)
            await wait_for(functools.partial(_settled, s))
            assert s.state is OffloadState.FALLBACK and s.reason == why, (caller, s.reason)
            assert await cl.cmd(f"D {call} f t") == "0\n"
        await app.offloader.drained()
        assert await probe.read("pipe.Ingress.relay") == []
        await wait_for(lambda: len(app.table) == 0)
        cl.close()


async def test_ipv6_nat_latch_and_a_stranger_refused() -> None:
    """An IPv6 party inside --nat-nets waits for its first packet (the switch's
    learn digest, IPv6 addresses) and is latched from there; a stranger at
    another party's relay port is refused and named in brackets."""
    relay, caller_port, callee_port = "2001:db8:ff::1", 36002, 36000
    fake = FakeSwitch()
    table = SessionTable()
    off = Offloader(
        table,
        fake,
        nat_nets=["fd00:100:64:77::/64"],
        port_binding=PortBinding.LEARNED,
        learn_window_ms=200,
    )
    events: list[tuple[str, dict[str, object]]] = []
    off.listeners.append(lambda kind, _s, payload: events.append((kind, payload)))
    off.start()
    try:
        off.read_capabilities()  # what a SwitchUp does: this switch relays IPv6
        assert off.planner.ipv6
        s = Session("nat6", "f;1", to_tag="t;1")
        s.streams = [
            Stream(port=callee_port, laddr=relay, sdp=Endpoint("2001:db8:2::10", 7000)),
            Stream(port=caller_port, laddr=relay, sdp=Endpoint("fd00:100:64:77::10", 6000)),
        ]
        table.add(s)
        off.touch(s)

        def packet(src: tuple[str, int], port: int, ingress: int) -> None:
            fake.queue.put_nowait(
                LearnEvent(SwEndpoint.of(*src), SwEndpoint.of(relay, port), ingress)
            )

        packet(("2001:db8:2::10", 7000), callee_port, 2)
        packet(("2001:db8:3::10", 41000), caller_port, 4)  # the NAT66's public address
        await wait_for(lambda: s.state is OffloadState.OFFLOADED)
        assert s.streams[1].learned == Endpoint("2001:db8:3::10", 41000)
        assert FlowKey("2001:db8:3::10", relay, 41000, caller_port, 4) in fake.relays
        leg = next(lg for lg in fake.legs.values() if lg.dst_addr == "2001:db8:3::10")
        assert (leg.dst_port, leg.src_addr, leg.src_port) == (41000, relay, caller_port)
        packet(("2001:db8:4::10", 4000), callee_port, 5)  # a stranger
        await wait_for(lambda: any(k == "learn_refused" for k, _ in events))
        (refused,) = [p for k, p in events if k == "learn_refused"]
        assert refused["source"] == "[2001:db8:4::10]:4000", refused
    finally:
        await off.stop()
