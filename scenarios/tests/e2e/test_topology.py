"""The testbed itself: idempotent set-up, repair after a crash, clean tear-down.

Runs with no e2e stack up (it holds the testbed) and the kernel forwarder,
then removes everything; the e2e stack builds its own testbed.
"""

from __future__ import annotations

import os
import subprocess

import pytest
from p4relay_scenarios import topology
from p4relay_scenarios.netns import link_exists, namespaces

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces)")


def udp_reaches(src_ns: str, dst_ns: str, dst: str) -> bool:
    code_rx = (
        "import socket,sys;s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM);"
        "s.bind(('0.0.0.0',9999));print('bound',flush=True);s.settimeout(3);"
        "d,a=s.recvfrom(64);print(a[0])"
    )
    rx = subprocess.Popen(
        ["ip", "netns", "exec", dst_ns, "python3", "-c", code_rx], stdout=subprocess.PIPE, text=True
    )
    assert rx.stdout is not None
    assert rx.stdout.readline().strip() == "bound"  # the receiver listens before the send
    code_tx = (
        "import socket;s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM);"
        f"s.sendto(b'x',('{dst}',9999))"
    )
    subprocess.run(["ip", "netns", "exec", src_ns, "python3", "-c", code_tx], check=True)
    out, _ = rx.communicate(timeout=10)
    return rx.returncode == 0 and bool(out.strip())


@pytest.mark.usefixtures("testbed_lock")
def test_up_is_idempotent_repairs_and_down_cleans() -> None:
    topology.down()
    try:
        plan = topology.up("kernel")
        assert {p.host for p in plan} == {"relay", "uac", "uas", "nat", "attacker"}
        assert topology.up("kernel") is not None  # second run: nothing breaks
        assert udp_reaches("p4r-uac", "p4r-uas", topology.UAS.addr)
        # Behind the NAT: the relay sees the NAT host's WAN address.
        assert udp_reaches(topology.NATUAC_NS, "p4r-relay", topology.RELAY.addr)

        # A crash left half a testbed: one namespace gone. up() repairs it.
        subprocess.run(["ip", "netns", "del", "p4r-uas"], check=True)
        topology.up("kernel")
        assert udp_reaches("p4r-uac", "p4r-uas", topology.UAS.addr)

        topology.set_rate("uas", 500)
        topology.set_rate("uas", None)
        with pytest.raises(ValueError):
            topology.set_rate("uas", 0)
    finally:
        topology.down()
    assert not [n for n in namespaces() if n.startswith("p4r-")]
    assert not link_exists("p4r-mgmt")
    topology.down()  # and again: nothing to do, no error
