"""RTPProxy through PyPI rtp.io, in its own process.

`python -m rtpagent.embedded --control udp:127.0.0.1:22223 --listen 127.0.0.1
--ports 35000-35999 [-- extra RTPProxy flags]` runs the real RTPProxy as a
separate process, as production runs the daemon. `rtpagent --rtpproxy embedded`
starts it as the agent's child; the restart-safety tests start it themselves.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from typing import Any


def start(control: str, listen: str, port_min: int, port_max: int, extra: list[str]) -> Any:
    from rtp.io import rtpproxy

    args = ["-s", control, "-l", listen, "-F", *extra]
    return rtpproxy(port_min=port_min, port_max=port_max, extra_args=args)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m rtpagent.embedded", description=__doc__)
    ap.add_argument("--control", required=True, help="RTPProxy -s socket, e.g. udp:127.0.0.1:22223")
    ap.add_argument("--listen", required=True, help="RTPProxy -l address")
    ap.add_argument("--ports", default="35000-65000", help="media port range lo-hi")
    ap.add_argument(
        "--workdir",
        default=".",
        help="working directory: RTPProxy's accounting module writes rtpproxy_acct.csv there",
    )
    ap.add_argument("extra", nargs="*", help="extra RTPProxy flags (after --)")
    a = ap.parse_args(argv)
    lo, _, hi = a.ports.partition("-")
    os.makedirs(a.workdir, exist_ok=True)
    os.chdir(a.workdir)
    rtpp = start(a.control, a.listen, int(lo), int(hi), a.extra)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
    print("rtpproxy ready", flush=True)
    done.wait()
    del rtpp
    return 0


if __name__ == "__main__":
    sys.exit(main())
