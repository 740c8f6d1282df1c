"""Offload, re-INVITE, teardown, R/C/P take-back, fail-open: real RTPProxy + real softswitch."""

from __future__ import annotations

from pathlib import Path

from harness import Client, Softswitch, running_agent, settings, softswitch, wait_for
from p4relay_switch import SwitchClient
from rtpagent.state import OffloadState


async def relays(c: SwitchClient) -> dict[tuple[str, str, int, int], dict[str, object]]:
    import ipaddress

    out = {}
    for e in await c.read("pipe.Ingress.relay"):
        k = e.key
        out[
            (
                str(ipaddress.IPv4Address(k["hdr.ipv4.src_addr"])),
                str(ipaddress.IPv4Address(k["hdr.ipv4.dst_addr"])),
                int(k["hdr.udp.src_port"]),  # type: ignore[arg-type]
                int(k["hdr.udp.dst_port"]),  # type: ignore[arg-type]
            )
        ] = dict(e.data)
    return out


async def guards(c: SwitchClient) -> set[tuple[str, int]]:
    import ipaddress

    return {
        (str(ipaddress.IPv4Address(e.key["hdr.ipv4.dst_addr"])), int(e.key["hdr.udp.dst_port"]))  # type: ignore[arg-type]
        for e in await c.read("pipe.Ingress.relay_guard")
    }


async def legs(c: SwitchClient) -> dict[int, dict[str, object]]:
    return {int(e.key["ig_md.leg"]): dict(e.data) for e in await c.read("pipe.Ingress.leg_rewrite")}  # type: ignore[arg-type]


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
        import ipaddress

        rw = lg[int(caller_leg)]  # type: ignore[arg-type]
        assert str(ipaddress.IPv4Address(rw["dst_addr"])) == "198.18.2.10"  # type: ignore[arg-type]
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
        await wait_for(lambda: any(k[2] == 7100 for k in app.offloader.by_key))
        await app.offloader.drained()
        got = await relays(probe)
        assert len(got) == 4
        assert {k[2] for k in got} == {6000, 6001, 7100, 7101}
        lg = await legs(probe)
        assert sorted(v["dst_port"] for v in lg.values()) == [6000, 7100]  # type: ignore[type-var]
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
    from harness import free_port

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


async def test_fail_open_guard_table_full(tmp_path: Path) -> None:
    """Room for two calls' relays but, with another client's guards taking half
    the guard table, for one call's guards: the second call stays on RTPProxy
    and nothing of it is left in the switch."""
    from p4relay_switch import Entry
    from p4relay_switch.pipeline import A_GUARD_DROP, RELAY_GUARD

    with softswitch(["--relay-entries", "8"]) as small:
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


async def test_write_order_guards_after_relays_deleted_first(
    tmp_path: Path, sw: Softswitch
) -> None:
    """One Write per batch: guards are inserted after the relay entries and
    deleted before them, so a legitimate packet is never dropped."""
    from p4relay_switch.pipeline import RELAY, RELAY_GUARD
    from p4relay_switch.proto import bfruntime_pb2 as pb
    from rtpagent.bfrt import BfrtSwitch
    from rtpagent.offload import Offloader
    from rtpagent.state import Endpoint, SessionTable, Stream
    from rtpagent.state import Session as Sess
    from rtpagent.switchport import Batch

    bs = BfrtSwitch(sw.address, client_id=5)
    await bs.start()
    try:
        s = Sess("order", "f;1")
        s.streams = [
            Stream(port=36010, laddr="127.0.0.1", sdp=Endpoint("198.18.2.10", 7000)),
            Stream(port=36020, laddr="127.0.0.1", sdp=Endpoint("198.18.1.10", 6000)),
        ]
        p = Offloader(SessionTable(), bs).plan(s, [1, 2])
        schema = bs.client.schema
        relay_id, guard_id = schema.table(RELAY).id, schema.table(RELAY_GUARD).id

        def tables(b: Batch) -> list[int]:
            ups, _ = bs._updates(b, 1000)
            ids = [pb.Update.FromString(u).entity.table_entry.table_id for u in ups]
            return [t for t in ids if t in (relay_id, guard_id)]

        install = Batch(add_legs=p.legs, add_relays=p.relays, add_guards=p.guards)
        assert tables(install) == [relay_id] * 4 + [guard_id] * 4
        removal = Batch(del_guards=p.guards, del_relays=tuple(p.flow_keys()), del_legs=(1, 2))
        assert tables(removal) == [guard_id] * 4 + [relay_id] * 4
        await bs.write(install, 1000)  # the switch takes them in that order
        await bs.write(removal, 1000)
        dump = await bs.dump()
        assert (dump.relays, dump.legs, dump.guards) == ([], [], [])
    finally:
        await bs.close()


async def test_wire_encoding_matches_generic_client(sw: Softswitch) -> None:
    """The agent writes hot-table updates as hand-joined wire bytes: each must
    parse to exactly the message the generic, schema-checked client builds."""
    from p4relay_switch import Entry
    from p4relay_switch.pipeline import (
        A_GUARD_DROP,
        A_RELAY_LEG,
        A_REWRITE,
        K_DST_ADDR,
        K_DST_PORT,
        K_LEG,
        K_SRC_ADDR,
        K_SRC_PORT,
        LEG_REWRITE,
        QUALITY_REGISTERS,
        RELAY,
        RELAY_GUARD,
        TTL,
    )
    from p4relay_switch.proto import bfruntime_pb2 as pb
    from rtpagent.bfrt import BfrtSwitch
    from rtpagent.switchport import Batch, FlowKey, GuardKey, LegRewrite, RelayEntry

    bs = BfrtSwitch(sw.address, client_id=6)
    await bs.start()
    try:
        c = bs.client
        key = FlowKey("198.18.1.10", "127.0.0.1", 6001, 40001)
        gkey = GuardKey("127.0.0.1", 40001)
        lg = LegRewrite(300, "127.0.0.1", "198.18.2.10", 40002, 7000)
        rkey = {K_SRC_ADDR: "198.18.1.10", K_DST_ADDR: "127.0.0.1", K_SRC_PORT: 6001}
        rkey[K_DST_PORT] = 40001
        lg_data = {"src_addr": "127.0.0.1", "dst_addr": "198.18.2.10"}
        lg_data |= {"src_port": 40002, "dst_port": 7000}
        want = [
            c.update(
                pb.Update.DELETE, RELAY_GUARD, Entry({K_DST_ADDR: "127.0.0.1", K_DST_PORT: 40001})
            ),
            c.update(pb.Update.DELETE, RELAY, Entry(rkey)),
            *(
                c.update(pb.Update.MODIFY, t.name, Entry({"$REGISTER_INDEX": 300}, None, {f: 0}))
                for t, f in (c._register(r) for r in QUALITY_REGISTERS)
            ),
            c.update(pb.Update.MODIFY, LEG_REWRITE, Entry({K_LEG: 300}, A_REWRITE, lg_data)),
            c.update(pb.Update.INSERT, LEG_REWRITE, Entry({K_LEG: 300}, A_REWRITE, lg_data)),
            c.update(
                pb.Update.INSERT,
                RELAY,
                Entry(rkey, A_RELAY_LEG, {"leg": 300, "rtcp": 1, TTL: 5000}),
            ),
            c.update(
                pb.Update.INSERT,
                RELAY_GUARD,
                Entry({K_DST_ADDR: "127.0.0.1", K_DST_PORT: 40001}, A_GUARD_DROP),
            ),
            c.update(pb.Update.DELETE, LEG_REWRITE, Entry({K_LEG: 300})),
        ]
        batch = Batch(
            add_legs=(lg,),
            mod_legs=(lg,),
            add_relays=(RelayEntry(key, 300, True),),
            del_relays=(key,),
            del_legs=(300,),
            reset_legs=(300,),
            add_guards=(gkey,),
            del_guards=(gkey,),
        )
        ups, kinds = bs._updates(batch, 5000)
        assert [pb.Update.FromString(u) for u in ups] == want
        assert kinds == [0, 0] + [1] * (len(QUALITY_REGISTERS) + 1) + [2, 2, 2, 0]
        enc = bs._encoder()
        ents, sent = enc.relay_reads([key])
        te = c.table_entry(RELAY, Entry(rkey))
        te.table_flags.from_hw = True
        assert [pb.Entity.FromString(e) for e in ents] == [pb.Entity(table_entry=te)]
        assert sent == {te.key.SerializeToString(): key}
        gents, gsent = enc.guard_reads([gkey])
        gte = c.table_entry(RELAY_GUARD, Entry({K_DST_ADDR: "127.0.0.1", K_DST_PORT: 40001}))
        gte.table_flags.from_hw = True
        assert [pb.Entity.FromString(e) for e in gents] == [pb.Entity(table_entry=gte)]
        assert gsent == {gte.key.SerializeToString(): gkey}
        # Read back through the raw RPC: the counters of an entry just written.
        await bs.write(Batch(add_legs=(lg,), add_relays=(RelayEntry(key, 300, True),)), 5000)
        assert (await bs.read_counters([key]))[key].packets == 0
        await bs.write(Batch(del_relays=(key,), del_legs=(300,)), 5000)
    finally:
        await bs.close()


async def test_switch_idle_ends_call(tmp_path: Path, sw: Softswitch) -> None:
    """No packet for the entry TTL: the softswitch reports the entries idle; the
    agent deletes the session in RTPProxy and notifies the SIP server's socket."""
    import asyncio

    from harness import free_port

    got: list[bytes] = []

    async def sip_server(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        while line := await r.readline():
            got.append(line)

    port = free_port()
    srv = await asyncio.start_server(sip_server, "127.0.0.1", port)
    cfg = settings(
        tmp_path, switch=sw.address, idle_ttl_ms=1500, embedded_args=["-n", f"tcp:127.0.0.1:{port}"]
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
