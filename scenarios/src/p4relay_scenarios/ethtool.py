"""Turn off TX checksum offload on an interface (the one `ethtool -K dev tx off` knob).

veth hands UDP packets to its peer with the checksum left for "hardware" to fill
in. A switch that reads frames off the peer with AF_PACKET/AF_XDP and sends them
on another port would forward a wrong checksum, so the testbed hosts compute
checksums in software. ethtool is not installed everywhere; the ioctl is tiny.

Run inside a namespace: `ip netns exec NS python -m p4relay_scenarios.ethtool DEV`.
"""

from __future__ import annotations

import array
import fcntl
import socket
import struct
import sys

SIOCETHTOOL = 0x8946
ETHTOOL_STXCSUM = 0x00000017  # set TX hw csum enable (ethtool_value)


def tx_checksum_off(ifname: str) -> None:
    value = array.array("B", struct.pack("II", ETHTOOL_STXCSUM, 0))
    ifreq = struct.pack("16sP", ifname.encode(), value.buffer_info()[0])
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        fcntl.ioctl(sock.fileno(), SIOCETHTOOL, ifreq)


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: python -m p4relay_scenarios.ethtool DEV [DEV...]", file=sys.stderr)
        return 2
    for dev in argv:
        try:
            tx_checksum_off(dev)
        except OSError as exc:
            print(f"ethtool: {dev}: cannot turn TX checksum offload off: {exc}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
