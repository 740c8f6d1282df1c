"""Bad and unusual packets: defined behaviour, never a crash.

truncated / inconsistent IPv4 .... dropped
bad IPv4 header checksum ......... dropped (RFC 1812 5.2.2)
non-IP, IPv6 with no route ....... dropped (ARP and NDP go to the CPU port)
IPv6 version != 6, truncated .... dropped
IPv4 options ..................... routed and relayed, options kept
fragments ........................ routed, never relayed (no ports past the first)
non-RTP UDP on a relay 5-tuple ... relayed, quality registers untouched
"""

from __future__ import annotations

from p4rbase import HOST_IP, HOST_MAC, RELAY_IP, SW_MAC, P4RelayTest, forwarded, udp_packet
from scapy.layers.inet import IP, UDP, IPOption_RR
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import ARP, Ether
from scapy.packet import Raw
from scapy.utils import checksum


def _alive(t: P4RelayTest) -> None:
    ok = udp_packet(in_port=1, src=HOST_IP[1], dst=HOST_IP[2], sport=1, dport=2)
    t.send(1, ok)
    t.expect(forwarded(ok, 2), 2)
    t.expect_nothing()


class MalformedDropped(P4RelayTest):
    def runTest(self) -> None:
        good = udp_packet(in_port=1, src=HOST_IP[1], dst=HOST_IP[2], sport=1, dport=2)
        raw = bytes(good)
        eth = Ether(src=HOST_MAC[1], dst=SW_MAC[1], type=0x0800)

        def patched(offset: int, data: bytes, fix_checksum: bool = True) -> bytes:
            """``raw`` with bytes replaced and (unless told) a valid header checksum,
            so each frame is wrong in exactly one way."""
            b = bytearray(raw)
            b[offset : offset + len(data)] = data
            if fix_checksum:
                b[24:26] = b"\0\0"
                b[24:26] = checksum(bytes(b[14:34])).to_bytes(2, "big")
            return bytes(b)

        ip_ck = int.from_bytes(raw[24:26], "big")
        bad_frames = [
            bytes(eth),  # EtherType IPv4, no header at all
            raw[: 14 + 10],  # IPv4 header cut short
            raw[: 14 + 20 + 4],  # UDP header cut short (total length says more)
            patched(
                24, (ip_ck ^ 0x0101).to_bytes(2, "big"), fix_checksum=False
            ),  # bad header checksum
            patched(14, b"\x44"),  # IHL 4 (< 5)
            patched(14, b"\x65"),  # version 6 inside an IPv4 EtherType
            patched(16, (len(raw) - 14 + 100).to_bytes(2, "big")),  # total length > frame
        ]
        for f in bad_frames:
            self.dataplane.send(0, 1, f)
        self.expect_nothing(1.0)
        _alive(self)


class NonIpv4Dropped(P4RelayTest):
    def runTest(self) -> None:
        arp = Ether(src=HOST_MAC[1], dst="ff:ff:ff:ff:ff:ff") / ARP(
            op=1, hwsrc=HOST_MAC[1], psrc=HOST_IP[1], pdst="198.18.1.1"
        )
        v6 = (
            Ether(src=HOST_MAC[1], dst=SW_MAC[1])
            / IPv6(src="2001:db8::1", dst="2001:db8::2")
            / UDP(sport=1, dport=2)
        )
        lldp = Ether(src=HOST_MAC[1], dst="01:80:c2:00:00:0e", type=0x88CC) / Raw(b"\x00" * 46)
        v6_bytes = bytes(v6)
        # the IPv6 EtherType with version 4 in the header, and an IPv6 header cut short
        v6_version4 = v6_bytes[:14] + bytes([0x40 | (v6_bytes[14] & 0x0F)]) + v6_bytes[15:]
        v6_short = v6_bytes[: 14 + 30]
        for p in (arp, v6, lldp, v6_version4, v6_short):
            self.send(1, p)
        self.expect_nothing(1.0)
        _alive(self)


class Ipv4OptionsRoutedAndRelayed(P4RelayTest):
    def runTest(self) -> None:
        opts = [IPOption_RR(pointer=4, routers=["0.0.0.0"])]
        p = (
            Ether(src=HOST_MAC[1], dst=SW_MAC[1])
            / IP(src=HOST_IP[1], dst=HOST_IP[2], ttl=64, options=opts)
            / UDP(sport=1, dport=2)
            / Raw(b"options" * 4)
        )
        p = Ether(bytes(p))
        self.assertEqual(p[IP].ihl, 7)
        self.send(1, p)
        self.expect(forwarded(p, 2), 2)
        self.calls.install(self.call())
        r = (
            Ether(src=HOST_MAC[1], dst=SW_MAC[1])
            / IP(src=HOST_IP[1], dst=RELAY_IP, ttl=64, options=opts)
            / UDP(sport=6000, dport=20000)
            / Raw(b"\x80\x08" + b"\x00" * 170)
        )
        r = Ether(bytes(r))
        self.send(1, r)
        self.expect(forwarded(r, 2, src=RELAY_IP, dst=HOST_IP[2], sport=20002, dport=7000), 2)
        self.expect_nothing()


class FragmentsNotRelayed(P4RelayTest):
    """A fragmented datagram matching a relay 5-tuple is routed, not rewritten."""

    def runTest(self) -> None:
        self.calls.install(self.call())
        first = udp_packet(in_port=1, src=HOST_IP[1], dst=RELAY_IP, sport=6000, dport=20000)
        first[IP].flags = "MF"
        first = Ether(bytes(first))
        later = (
            Ether(src=HOST_MAC[1], dst=SW_MAC[1])
            / IP(src=HOST_IP[1], dst=RELAY_IP, ttl=64, proto=17, frag=64)
            / Raw(b"\x17\x70\x4e\x20" + b"z" * 36)  # looks like ports 6000 -> 20000
        )
        later = Ether(bytes(later))
        for f in (first, later):
            self.send(1, f)
            self.expect(forwarded(f, 3), 3)
        self.expect_nothing()


class NonRtpUdpRelayed(P4RelayTest):
    """Non-RTP payloads on a relay 5-tuple are relayed; quality registers untouched."""

    def runTest(self) -> None:
        call = self.call()
        self.calls.install(call)
        for payload in (b"", b"\x00" * 11, b"\x40" + b"\x00" * 40, b"STUN-ish" * 3):
            pkt = udp_packet(
                in_port=1,
                src=HOST_IP[1],
                dst=RELAY_IP,
                sport=6000,
                dport=20000,
                payload=payload,
            )
            self.send(1, pkt)
            self.expect(forwarded(pkt, 2, src=RELAY_IP, dst=HOST_IP[2], sport=20002, dport=7000), 2)
        q = self.calls.quality([call.a_to_b.leg])[call.a_to_b.leg]
        self.assertEqual(q.packets, 0)
        self.expect_nothing()
