"""Differential fuzzing at length: a long seeded corpus into RTPProxy directly
and through the agent (both the real rtp.io RTPProxy, the agent on the
software switch), as `tests/test_differential.py` does with a short one.
Prints one table: datagrams, answer classes, mismatches, sessions held."""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from differential import active_sessions, ask_once, corpus, run
from harness import (
    RtpproxyProcess,
    free_port,
    free_udp_pair,
    settings,
    softswitch,
)
from p4relay_runtime.logs import configure_logging
from rtpagent.app import App


async def main(n: int, seed: int) -> int:
    configure_logging("error", json=False)
    with softswitch() as sw, tempfile.TemporaryDirectory(prefix="p4ra-diff-") as tmp:
        port = free_udp_pair()
        notify = free_port()
        flags = ["-T", "60", "-n", f"tcp:127.0.0.1:{notify}", "-d", "CRIT"]
        behind = RtpproxyProcess(port + 1, "127.0.0.1", "38500-38999", flags)
        direct_port = free_udp_pair()
        direct = RtpproxyProcess(direct_port, "127.0.0.1", "38000-38499", flags)
        behind.start()
        direct.start()
        app = App(
            settings(
                Path(tmp),
                port=port,
                rtpproxy=f"udp:127.0.0.1:{port + 1}",
                notify_listen=f"tcp:127.0.0.1:{notify}",
                relay_ports="38500-38999",
                switch=sw.address,
                log_level="error",
            )
        )
        try:
            await app.start()
            res = await run(corpus(seed, n), direct_port, port)
            a = active_sessions(await ask_once(direct_port, b"i1 I"))
            b = active_sessions(await ask_once(port + 1, b"i2 I"))
            held = len(app.table)
            stale = 0
            for s in app.table:
                to = f" {s.to_tag}" if s.to_tag else ""
                q = await ask_once(direct_port, f"q Q {s.call_id} {s.tag}{to}".encode("latin-1"))
                stale += q is None or q.startswith(b"q E")
        finally:
            await app.stop()
            behind.stop()
            direct.stop()
    rows = [
        (f"datagrams (seed {seed})", f"{res.sent:,}"),
        ("seconds", f"{res.seconds:.1f}"),
        ("answer classes", f"{len(res.classes)}"),
        (
            "successes / errors",
            f"{res.classes.get('ok', 0):,} / {res.sent - res.classes.get('ok', 0):,}",
        ),
        ("reply class mismatches", f"{len(res.mismatches)}"),
        ("sessions: direct / behind the agent / agent", f"{a} / {b} / {held}"),
        ("agent sessions RTPProxy lacks", f"{stale}"),
    ]
    w = max(len(k) for k, _ in rows)
    print(f"{'rtpagent differential fuzz':<{w}}  value")
    for k, v in rows:
        print(f"{k:<{w}}  {v}")
    for m in res.mismatches[:20]:
        print(f"  mismatch {m.datagram!r}: direct {m.direct!r}, agent {m.agent!r}")
    ok = not res.mismatches and a == b and stale == 0
    return 0 if ok else 1


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--datagrams", type=int, default=50000)
    ap.add_argument("--seed", type=int, default=2026)
    args = ap.parse_args()
    sys.exit(asyncio.run(main(args.datagrams, args.seed)))
