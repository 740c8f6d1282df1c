"""The P4 program's checksum field lists produce correct checksums.

Checksums are where a compiled program goes silently wrong: a field missing
from a list still compiles. This reads the ingress parser's residual lists
(`subtract({...})`, `subtract_all_and_deposit`) and the ingress deparser's
`update({...})` lists as written in the source, evaluates them with the ones'
complement arithmetic of Tofino's checksum engines on random relayed packets
(IPv4 options included; option words a packet does not have are not valid and
count as 0), and compares with checksums computed from scratch by scapy.
Reading the lists is a regular expression over two files, not a P4 parser:
the lists are flat comma-separated field paths. The files are run through the
C preprocessor first with each build profile's defines (switch/p4/build.sh),
as the compiler sees them, INT left out (-DP4RELAY_NO_INT): INT packets take
their own UDP parser state, which a flat read of the lists would add to the
relay path's, and they are routed, never relayed.
"""

from __future__ import annotations

import random
import re
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import pytest

P4_ROOT = Path(__file__).resolve().parents[2] / "p4"
PARSER = "parsers/ingress_parser.p4"
DEPARSER = "deparsers/ingress_deparser.p4"

_SUBTRACT = re.compile(r"(\w+)\.subtract\(\{([^}]*)\}\)")
_DEPOSIT = re.compile(r"(\w+)\.subtract_all_and_deposit\(([\w.]+)\)")
_UPDATE = re.compile(r"([\w.]+)\s*=\s*\w+\.update\(\s*(?:data\s*=\s*)?\{([^}]*)\}", re.S)
_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
_PROFILE = re.compile(r"^\s*(\w+)\)\s*(?:defines\+=\(([^)]*)\))?\s*;;", re.M)


@cache
def profiles() -> dict[str, tuple[str, ...]]:
    """Each build profile's -D defines, as switch/p4/build.sh passes them."""
    text = (P4_ROOT / "build.sh").read_text()
    out = {name: tuple((defs or "").split()) for name, defs in _PROFILE.findall(text)}
    assert "standard" in out, "build.sh names no standard profile"
    return out


def preprocess(text: str, defines: tuple[str, ...]) -> str:
    """`text` as the compiler sees it under `defines` (profiles.p4 first)."""
    src = (P4_ROOT / "include" / "profiles.p4").read_text() + "\n" + text
    return subprocess.run(
        ["cpp", "-P", "-undef", "-nostdinc", *defines],
        input=src,
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def _fields(text: str) -> list[str]:
    return [f.strip() for f in text.split(",") if f.strip()]


def field_widths() -> dict[str, int]:
    """Field widths of the ingress headers and metadata, from the declarations."""
    src = "".join(
        _COMMENT.sub("", (P4_ROOT / "include" / f).read_text())
        for f in ("defines.p4", "headers.p4", "metadata.p4")
    )
    types = {n: int(w) for w, n in re.findall(r"typedef bit<(\d+)>\s+(\w+);", src)}
    types["PortId_t"] = 9

    def members(block: str) -> dict[str, str]:
        return dict((n, t) for t, n in re.findall(r"([\w<>]+)\s+(\w+);", block))

    decls = {n: members(b) for n, b in re.findall(r"(?:header|struct)\s+(\w+)\s*\{([^}]*)\}", src)}

    def width(t: str) -> int | None:
        m = re.fullmatch(r"bit<(\d+)>", t)
        return int(m.group(1)) if m else types.get(t)

    out: dict[str, int] = {}

    def walk(prefix: str, decl: str) -> None:
        for name, t in decls[decl].items():
            w = width(t)
            if w is not None:
                out[f"{prefix}.{name}"] = w
            elif t in decls:
                walk(f"{prefix}.{name}", t)

    walk("hdr", "ingress_headers_t")
    walk("ig_md", "ingress_metadata_t")
    return out


def _ones_add(acc: int, data: bytes) -> int:
    for k in range(0, len(data), 2):
        acc += int.from_bytes(data[k : k + 2], "big")
        acc = (acc & 0xFFFF) + (acc >> 16)
    return acc


def _ones_sub(acc: int, data: bytes) -> int:
    return _ones_add(acc, bytes(b ^ 0xFF for b in data))


def _field_bytes(values: dict[str, int], widths: dict[str, int], names: list[str]) -> bytes:
    bits = acc = 0
    for n in names:
        assert n in widths, f"checksum list names {n}, which the headers do not declare"
        acc = (acc << widths[n]) | values.get(n, 0)
        bits += widths[n]
    assert bits % 8 == 0, f"checksum list {names} is not byte aligned ({bits} bits)"
    return acc.to_bytes(bits // 8, "big")


def _values(p: Any) -> dict[str, int]:
    from scapy.layers.inet import UDP

    raw = bytes(p)[: p.ihl * 4]
    v = {
        "hdr.ipv4.version": p.version,
        "hdr.ipv4.ihl": p.ihl,
        "hdr.ipv4.diffserv": p.tos,
        "hdr.ipv4.total_len": p.len,
        "hdr.ipv4.identification": p.id,
        "hdr.ipv4.flag_reserved": (int(p.flags) >> 2) & 1,
        "hdr.ipv4.flag_df": (int(p.flags) >> 1) & 1,
        "hdr.ipv4.flag_mf": int(p.flags) & 1,
        "hdr.ipv4.frag_offset": p.frag,
        "hdr.ipv4.ttl": p.ttl,
        "hdr.ipv4.protocol": p.proto,
        "hdr.ipv4.hdr_checksum": p.chksum,
        "hdr.ipv4.src_addr": int.from_bytes(raw[12:16], "big"),
        "hdr.ipv4.dst_addr": int.from_bytes(raw[16:20], "big"),
        "hdr.udp.src_port": p[UDP].sport,
        "hdr.udp.dst_port": p[UDP].dport,
        "hdr.udp.hdr_length": p[UDP].len,
        "hdr.udp.checksum": p[UDP].chksum,
    }
    # ihl - 5 option words fill w(15 - ihl) .. w9 (the parser's state order)
    words = [int.from_bytes(raw[k : k + 4], "big") for k in range(20, len(raw), 4)]
    first = 10 - len(words)
    for i, w in enumerate(words):
        v[f"hdr.ipv4_options.w{first + i}.data"] = w
    return v


def checksum_mismatch(
    sources: dict[str, str] | None = None, profile: str = "standard"
) -> str | None:
    """First packet whose P4-computed checksums differ from scapy's, or None."""
    from scapy.layers.inet import IP, UDP, IPOption_RR
    from scapy.packet import Raw

    text = {f: (sources or {}).get(f) or (P4_ROOT / f).read_text() for f in (PARSER, DEPARSER)}
    defines = (*profiles()[profile], "-DP4RELAY_NO_INT")
    parser = _COMMENT.sub("", preprocess(text[PARSER], defines))
    deparser = _COMMENT.sub("", preprocess(text[DEPARSER], defines))
    subtracts = [(inst, _fields(body)) for inst, body in _SUBTRACT.findall(parser)]
    deposits = {target: inst for inst, target in _DEPOSIT.findall(parser)}
    updates = {target: _fields(body) for target, body in _UPDATE.findall(deparser)}
    if set(updates) != {"hdr.ipv4.hdr_checksum", "hdr.udp.checksum"}:
        return f"deparser updates {sorted(updates)}"
    widths = field_widths()

    rng = random.Random(7)
    for n in range(400):
        opts = [IPOption_RR(routers=["0.0.0.0"] * rng.randint(1, 8))] if n % 3 == 0 else []
        pkt = IP(
            bytes(
                IP(
                    src=f"198.18.1.{rng.randint(1, 254)}",
                    dst="198.18.0.10",
                    ttl=rng.randint(2, 255),
                    id=rng.randint(0, 65535),
                    flags=rng.choice([0, 2]),
                    options=opts,
                )
                / UDP(sport=rng.randint(1, 65535), dport=rng.randint(20000, 29999))
                / Raw(bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 40))))
            )
        )
        before = _values(pkt)
        residual: dict[str, int] = {}
        for inst, fields in subtracts:
            residual[inst] = _ones_sub(residual.get(inst, 0), _field_bytes(before, widths, fields))

        out = pkt.copy()
        out.src = f"203.0.113.{rng.randint(1, 254)}"
        out.dst = f"198.18.2.{rng.randint(1, 254)}"
        rtcp = n % 2
        out[UDP].sport = (rng.randint(20000, 29998) + rtcp) & 0xFFFF
        out[UDP].dport = (rng.randint(1024, 65534) + rtcp) & 0xFFFF
        out.ttl = pkt.ttl - 1
        after = _values(out)
        for target, inst in deposits.items():
            after[target] = residual.get(inst, 0)
        got = {}
        for target, fields in updates.items():
            s = (~_ones_add(0, _field_bytes(after, widths, fields))) & 0xFFFF
            got[target] = 0xFFFF if (s == 0 and target == "hdr.udp.checksum") else s

        del out.chksum
        del out[UDP].chksum
        want = IP(bytes(out))
        if (got["hdr.ipv4.hdr_checksum"], got["hdr.udp.checksum"]) != (
            want.chksum,
            want[UDP].chksum,
        ):
            return f"packet {n} ({pkt.summary()}, ihl {pkt.ihl}): got {got}"
    return None


@pytest.mark.parametrize("profile", list(profiles()))
def test_checksum_lists_produce_correct_checksums(profile: str) -> None:
    assert checksum_mismatch(profile=profile) is None


def _mutate(rel: str, old: str, new: str) -> dict[str, str]:
    """The list changed wherever it is written (every parser state with it)."""
    text = (P4_ROOT / rel).read_text()
    assert old in text, f"mutation anchor {old!r} not in {rel}"
    return {rel: text.replace(old, new)}


@pytest.mark.parametrize(
    ("rel", "old", "new"),
    [
        pytest.param(
            DEPARSER,
            "            hdr.ipv4.dst_addr,\n            hdr.ipv4_options.w0.data,",
            "            hdr.ipv4_options.w0.data,",
            id="ipv4-update-misses-dst",
        ),
        pytest.param(
            DEPARSER,
            "            hdr.ipv4_options.w9.data\n",
            "            hdr.ipv4.identification\n",
            id="ipv4-update-misses-last-option-word",
        ),
        pytest.param(
            PARSER,
            "        udp_residual.subtract({hdr.udp.src_port, hdr.udp.dst_port});\n",
            "        udp_residual.subtract({hdr.udp.src_port});\n",
            id="udp-residual-keeps-dst-port",
        ),
        pytest.param(
            PARSER,
            "        udp_residual.subtract({hdr.ipv4.src_addr, hdr.ipv4.dst_addr});\n",
            "",
            id="udp-residual-keeps-addresses",
        ),
    ],
)
def test_wrong_checksum_list_is_caught(rel: str, old: str, new: str) -> None:
    assert checksum_mismatch(_mutate(rel, old, new)) is not None
