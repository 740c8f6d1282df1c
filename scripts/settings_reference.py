"""Each component's settings table in its README, generated from its settings model
(p4relay_runtime.settings.reference_table; the software switch's from its flags'
definition, `p4relay-softswitch --print-settings-table`), between the markers

    <!-- settings-reference:begin -->
    <!-- settings-reference:end -->

    uv run python scripts/settings_reference.py           rewrite the tables
    uv run python scripts/settings_reference.py --check   fail when one is stale (make lint)
    ... --only python | --only softswitch                 the Python components' or the switch's
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from p4relay_collector.config import Settings as CollectorSettings
from p4relay_controlplane.config import Settings as ControlplaneSettings
from p4relay_runtime.settings import reference_table
from p4relay_server.config import Settings as ServerSettings
from pydantic_settings import BaseSettings
from rtpagent.config import Settings as RtpagentSettings

ROOT = Path(__file__).resolve().parent.parent
BEGIN, END = "<!-- settings-reference:begin -->", "<!-- settings-reference:end -->"


@dataclass(frozen=True)
class Component:
    readme: str
    settings: type[BaseSettings]
    flags: bool  # every setting is also a command-line flag
    delimiter: str | None  # nested keys in the environment


COMPONENTS = [
    Component("server/README.md", ServerSettings, False, "__"),
    Component("collector/README.md", CollectorSettings, True, None),
    Component("rtpagent/README.md", RtpagentSettings, True, None),
    Component("switch/controlplane/README.md", ControlplaneSettings, False, "__"),
]


SOFTSWITCH_README = "switch/softswitch/README.md"


def softswitch_table() -> str:
    """The table the software switch prints (built by cargo when stale)."""
    cmd = ["cargo", "run", "--release", "--quiet", "--bin", "p4relay-softswitch", "--"]
    out = subprocess.run(
        [*cmd, "--print-settings-table"], cwd=ROOT / "switch", check=True, capture_output=True
    )
    return out.stdout.decode()


def render(text: str, table: str, path: str) -> str:
    pattern = re.compile(re.escape(BEGIN) + r"\n.*?" + re.escape(END), re.S)
    if len(pattern.findall(text)) != 1:
        raise SystemExit(f"{path}: needs one {BEGIN} ... {END} block")
    return pattern.sub(lambda _: f"{BEGIN}\n{table}{END}", text)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--check", action="store_true", help="fail when a table is stale")
    ap.add_argument("--only", choices=["python", "softswitch"], help="these components only")
    args = ap.parse_args()
    tables: dict[str, str] = {}
    if args.only != "softswitch":
        for c in COMPONENTS:
            tables[c.readme] = reference_table(c.settings, flags=c.flags, delimiter=c.delimiter)
    if args.only != "python":
        tables[SOFTSWITCH_README] = softswitch_table()
    stale = []
    for readme, table in tables.items():
        path = ROOT / readme
        text = path.read_text()
        new = render(text, table, readme)
        if new != text:
            stale.append(readme)
            if not args.check:
                path.write_text(new)
    if stale and args.check:
        print(
            f"settings_reference: stale settings table in {', '.join(stale)}: "
            "run `uv run python scripts/settings_reference.py`",
            file=sys.stderr,
        )
        return 1
    for readme in stale:
        print(f"settings_reference: {readme} rewritten")
    return 0


if __name__ == "__main__":
    sys.exit(main())
