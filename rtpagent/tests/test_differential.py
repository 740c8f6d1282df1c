"""The agent answers every datagram as RTPProxy does and changes nothing
RTPProxy would not: the same corpus into RTPProxy directly and through the
agent (both the real rtp.io RTPProxy, the agent on the real softswitch)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from differential import active_sessions, ask_once, corpus, reply_class, run
from harness import RtpproxyProcess, Softswitch, free_port, free_udp_pair, settings, wait_for
from p4relay_switch import SwitchClient
from rtpagent.app import App

pytestmark = pytest.mark.timeout(240)

# Bounded here; `make bench STAGE=rtpagent-differential` runs a long corpus.
CORPUS = int(os.environ.get("P4RELAY_DIFF_CORPUS", "4000"))


@dataclass
class Pair:
    app: App
    agent_port: int  # the agent's control socket
    behind: int  # the agent's RTPProxy, asked directly
    direct: int  # the other RTPProxy, the reference


@pytest.fixture
async def pair(tmp_path: Path, sw: Softswitch) -> AsyncIterator[Pair]:
    port = free_udp_pair()
    notify = free_port()
    flags = ["-T", "60", "-n", f"tcp:127.0.0.1:{notify}"]
    behind = RtpproxyProcess(port + 1, "127.0.0.1", "38500-38999", flags)
    direct_port = free_udp_pair()
    direct = RtpproxyProcess(direct_port, "127.0.0.1", "38000-38499", flags)
    behind.start()
    direct.start()
    app = App(
        settings(
            tmp_path,
            port=port,
            rtpproxy=f"udp:127.0.0.1:{port + 1}",
            notify_listen=f"tcp:127.0.0.1:{notify}",
            relay_ports="38500-38999",
            switch=sw.address,
        )
    )
    try:
        await app.start()
        yield Pair(app, port, port + 1, direct_port)
    finally:
        await app.stop()
        behind.stop()
        direct.stop()


async def _relays(probe: SwitchClient) -> int:
    return len(await probe.read("pipe.Ingress.relay"))


async def test_smuggled_delete_all_is_refused_like_rtpproxy(
    pair: Pair, probe: SwitchClient
) -> None:
    """`f2\\x1fX` is one word to RTPProxy (E5), never a `X` deleting every call."""
    assert await ask_once(pair.agent_port, b"s1 U sm 198.18.1.10 6000 f;1")
    assert await ask_once(pair.agent_port, b"s2 L sm 198.18.2.10 7000 f;1 t;1")

    async def installed() -> bool:
        return await _relays(probe) == 4

    await wait_for(installed, within=10.0, interval=0.1)
    for attack in (
        b"f2\x1fX",
        b"f3 V\x1fX",
        b"f4\xa0X",
        b"f5 \xc2\xa0X",
        b"f7 X\x00",
        b"f8\x00 X",
        b"f9 X\x85",
        b"fa I\x0bX",
    ):
        direct = await ask_once(pair.direct, attack)
        via = await ask_once(pair.agent_port, attack)
        assert via == direct, (attack, via, direct)
        assert reply_class(via)[1] != "ok", (attack, via)
    await pair.app.offloader.drained()
    assert await _relays(probe) == 4
    assert len(pair.app.table) == 1
    q = await ask_once(pair.behind, b"q1 Q sm f;1 t;1")
    assert q is not None and not q.startswith(b"q1 E"), q


async def test_differential_corpus(pair: Pair, probe: SwitchClient) -> None:
    datagrams = corpus(seed=15, n=CORPUS)
    res = await run(datagrams, pair.direct, pair.agent_port)
    shown = [(m.datagram, m.direct, m.agent) for m in res.mismatches[:10]]
    assert not res.mismatches, f"{len(res.mismatches)} of {res.sent} differ: {shown}"
    assert res.sent == len(datagrams)
    assert len(res.classes) > 5, res.classes  # the corpus reaches many answers
    # Both RTPProxies hold the same sessions; the agent none that they lack.
    a = active_sessions(await ask_once(pair.direct, b"i1 I"))
    b = active_sessions(await ask_once(pair.behind, b"i2 I"))
    assert a == b
    for s in pair.app.table:
        to = f" {s.to_tag}" if s.to_tag else ""
        for port in (pair.direct, pair.behind):
            q = await ask_once(port, f"q Q {s.call_id} {s.tag}{to}".encode("latin-1"))
            assert reply_class(q)[1] == "ok", (s.call_id, s.tag, s.to_tag, q)
    assert len(pair.app.table) <= b
    await pair.app.offloader.drained()
    offloaded = [uid for uid in pair.app.offloader.plans if uid in pair.app.table.by_uid]
    assert len(offloaded) == len(pair.app.offloader.plans)
    assert await _relays(probe) == 4 * len(offloaded)
