"""`rtpagent-ctl`: drain, evacuate, resume or ask a running agent, through its admin socket."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys

from .admin import COMMANDS, ctl

EPILOG = """\
examples:
  rtpagent-ctl --admin-socket /run/rtpagent/admin.sock status
  rtpagent-ctl drain        # new calls stay on RTPProxy (reason draining); offloaded ones stay
  rtpagent-ctl evacuate --wait 30   # every offloaded call back to RTPProxy; waits, prints the figures
  rtpagent-ctl resume

Signals do the same without the socket: SIGUSR1 drains, SIGUSR2 evacuates.
The most restrictive of the local mode and the server's (agent, switch) applies.
"""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="rtpagent-ctl",
        description="Maintenance controls of a running rtpagent (its admin socket).",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument(
        "--admin-socket",
        default=os.environ.get("P4RELAY_RTPAGENT_ADMIN_SOCKET", "/run/rtpagent/admin.sock"),
        help="the agent's --admin-socket (env P4RELAY_RTPAGENT_ADMIN_SOCKET)",
    )
    ap.add_argument("command", choices=[*COMMANDS, "status"])
    ap.add_argument(
        "--wait",
        type=float,
        default=0.0,
        help="evacuate: wait up to this many seconds for the last call to leave the switch",
    )
    a = ap.parse_args(argv)
    try:
        answer = asyncio.run(ctl(a.admin_socket, a.command, a.wait))
    except OSError as exc:
        print(f"rtpagent-ctl: {a.admin_socket}: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(answer, indent=2))
    if not answer.get("ok"):
        return 1
    if a.command == "evacuate" and a.wait > 0 and answer.get("evacuating"):
        print("rtpagent-ctl: evacuation still under way", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
