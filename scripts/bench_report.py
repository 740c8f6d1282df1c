"""Writes the current report of one benchmark stage to docs/benchmarks/<stage>.md.

`bench_report.py STAGE LOG` is called by `make bench` after a stage passes, or ends
with exit 3 (it ran to its end but a target is not met; $BENCH_RC=3). The report
holds the machine, the command, the date and commit, then the stage's table: the
Markdown file the stage wrote to $BENCH_TABLE when it wrote one, otherwise what the
stage printed (colour codes and progress-bar redraws removed). One file per stage,
replaced on every run, so the repository always holds exactly one current table.
"""

from __future__ import annotations

import os
import platform
import re
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def memory_gib() -> str:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return f"{int(line.split()[1]) / 2**20:.0f} GiB"
    except OSError:
        pass
    return "unknown"


def commit(root: Path) -> str:
    out = subprocess.run(
        ["git", "-C", str(root), "describe", "--always", "--dirty"],
        capture_output=True,
        text=True,
        check=False,
    )
    return out.stdout.strip() or "unknown"


def printed(log: Path) -> str:
    """The stage's output as a reader would have seen it at the end."""
    lines = []
    # Read as bytes: text mode would turn the progress bars' carriage returns into lines.
    for raw in log.read_bytes().decode(errors="replace").split("\n"):
        line = ANSI.sub("", raw).rsplit("\r", 1)[-1].rstrip()
        lines.append(line)
    return "```\n" + "\n".join(lines).strip("\n") + "\n```\n"


def main() -> int:
    if len(sys.argv) != 3:
        print("usage: bench_report.py STAGE LOG", file=sys.stderr)
        return 2
    stage, log = sys.argv[1], Path(sys.argv[2])
    root = Path(os.environ.get("P4RELAY_ROOT", Path(__file__).resolve().parent.parent))
    table_env = os.environ.get("BENCH_TABLE", "")
    table = Path(table_env) if table_env else None
    body = table.read_text() if table is not None and table.is_file() else printed(log)
    header = (
        f"# Benchmark: {stage}\n\n"
        f"- machine: {cpu_model()}, {os.cpu_count()} cores, {memory_gib()}, "
        f"Linux {platform.release()}\n"
        f"- command: `make bench STAGE={stage}`\n"
        f"- date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, commit {commit(root)}\n"
    )
    if os.environ.get("BENCH_RC") == "3":
        header += "- targets: not all met (the rows marked NO; the stage exits 3)\n"
    header += "\n"
    out = root / "docs" / "benchmarks" / f"{stage}.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(header + body)
    print(f"bench: report written to {out.relative_to(root)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
