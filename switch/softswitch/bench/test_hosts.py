"""The benchmark's hosts, on a direct veth pair of their own: the receiver
counts every frame, and neither family reaches the receiving namespace's IP
stack, whose work would otherwise differ between IPv4 and IPv6 and be counted
into the baselines (softswitch_bench.host_drops, stack_frames, trial).

Namespaces p4rh-<pid>-*: scripts/cleanup.d/softswitch.sh removes them once
this process is gone."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
import softswitch_bench as sb

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not sb.TOOL.exists(),
    reason="needs root (network namespaces, AF_PACKET, nftables) and the release benchtool",
)

RATE, SECS = 20_000, 0.1  # 2,000 frames a trial


@pytest.fixture
def testbed(monkeypatch: pytest.MonkeyPatch) -> Iterator[sb.Testbed]:
    monkeypatch.setattr(sb, "PREFIX", f"p4rh-{os.getpid()}")
    tb = sb.Testbed("hosts", direct=True)
    try:
        yield tb.build()
    finally:
        for ns in (tb.a, tb.b):
            sb.sh("ip", "netns", "delete", ns, check=False)


@pytest.mark.parametrize("ipv6", [False, True], ids=["ipv4", "ipv6"])
def test_receiver_counts_every_frame_and_no_stack_sees_one(testbed: sb.Testbed, ipv6: bool) -> None:
    dut = sb.direct(testbed, ipv6=ipv6)
    before = sb.stack_frames(testbed.b)
    t, _ = sb.trial(dut, RATE, SECS)
    assert t.sent == int(RATE * SECS)
    assert t.received == t.sent
    assert sb.stack_frames(testbed.b) == before


@pytest.mark.parametrize("ipv6", [False, True], ids=["ipv4", "ipv6"])
def test_a_trial_refuses_a_receiver_whose_stack_runs(testbed: sb.Testbed, ipv6: bool) -> None:
    # Without the drop, the stack receives every frame (IPv6 too: disabled in
    # these namespaces, it counts a frame before it discards it).
    sb.nsx(testbed.b, "nft", "delete", "table", "netdev", "p4rb_host")
    dut = sb.direct(testbed, ipv6=ipv6)
    with pytest.raises(RuntimeError, match=r"2000 frames reached the receiving host's IP stack"):
        sb.trial(dut, RATE, SECS)
