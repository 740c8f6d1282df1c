#!/usr/bin/env python3
"""Resource figures of compiled p4relay profiles, from the compiler's own logs.

Reads, per build directory (switch/p4/build.sh's output, build/p4relay-<profile>/):
  pipe/logs/metrics.json      SRAM, TCAM, map RAM totals of the pipe
  pipe/logs/table_summary.log stages of the final placement, per gress
  pipe/logs/mau.resources.log RAMs / TCAMs / map RAMs per table and stage
  bf-rt.json                  table and register sizes (the capacity)
  compile.rc, compile.log     written by the p4 stage (scripts/test-stages/05-p4.sh)

  resources.py summary DIR...            one line per profile (the p4 stage prints it)
  resources.py table DIR...              the README's table: stages, SRAM, TCAM, calls
  resources.py stages DIR                stage map: what each stage holds, per gress
  resources.py junit OUT SUITE DIR...    JUnit XML, one test case per profile
  resources.py same-schema A B           exit 0 when two bf-rt.json declare the same
                                         program (the snapshot debug tables, which
                                         the compiler orders differently run to run,
                                         aside)

Standard library only: it runs before the Python environment exists.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from xml.sax.saxutils import escape

STAGES = 12  # Tofino 1 MAU stages per pipe
STAGES_BY_TARGET = {"tofino": 12, "tofino2": 20}  # MAU stages per pipe
SRAM_PER_STAGE = 80  # both generations: 80 SRAM, 24 TCAM, 48 map RAM per stage
TCAM_PER_STAGE = 24
MAP_RAM_PER_STAGE = 48
# Parts of either generation: 2-pipe (Tofino 1: Wedge100BF-32X, 3.2T;
# Tofino 2: 6.4T) and 4-pipe (6.4T; 12.8T).
PIPES = (2, 4)
# The per-leg quality registers all have the same cells; this one stands for
# them. A build that splits them (P4RELAY_SCALE_T2) adds "<name>_hi".
QUALITY_REGISTER = "pipe.Egress.rtp_packets"


@dataclass
class TableUse:
    stage: int
    gress: str
    rams: int
    tcams: int
    map_rams: int


@dataclass
class Profile:
    name: str
    path: Path
    ok: bool
    error: str = ""
    ingress_stages: int = 0
    egress_stages: int = 0
    sram: int = 0
    tcam: int = 0
    map_ram: int = 0
    phv_bits: int = 0  # normal containers: bits occupied (of 4,096)
    tphv_bits: int = 0  # tagalong containers (of 2,048)
    sizes: dict[str, int] = field(default_factory=dict)
    tables: dict[str, list[TableUse]] = field(default_factory=dict)
    compile_s: float = 0.0
    target: str = "tofino"

    @property
    def stages(self) -> int:
        return max(self.ingress_stages, self.egress_stages)

    @property
    def max_stages(self) -> int:
        return STAGES_BY_TARGET.get(self.target, STAGES)

    def pct(self, used: int, per_stage: int) -> str:
        return f"{100 * used / (per_stage * self.max_stages):.0f} %"

    @property
    def quality_halves(self) -> list[int]:
        """Cells of the per-leg quality register (rtp_packets), or of its two
        halves where the build splits it (rtp_packets, rtp_packets_hi); empty
        without RTP quality."""
        return [
            self.sizes[n] for n in (QUALITY_REGISTER, QUALITY_REGISTER + "_hi") if n in self.sizes
        ]

    @property
    def calls_per_pipe(self) -> int:
        """A call: 4 relay entries, 4 guard entries, 2 legs (leg_rewrite and the
        quality registers' cells), all in the pipe its packets arrive on."""
        relay = self.sizes.get("pipe.Ingress.relay", 0)
        guard = self.sizes.get("pipe.Ingress.relay_guard", 0)
        legs = self.sizes.get("pipe.Ingress.leg_rewrite", 0)
        calls = min(relay // 4, guard // 4, legs // 2)
        if self.quality_halves:
            calls = min(calls, sum(self.quality_halves) // 2)
        return calls

    @property
    def calls6_per_pipe(self) -> int:
        """IPv6 calls: 4 relay6 entries, 4 relay_guard6 entries, 2 leg_rewrite6
        entries, their legs out of the same leg space as IPv4's (calls_per_pipe
        bounds IPv4 + IPv6 calls together). 0: the build has no IPv6 relay."""
        relay = self.sizes.get("pipe.Ingress.relay6", 0)
        guard = self.sizes.get("pipe.Ingress.relay_guard6", 0)
        legs = self.sizes.get("pipe.Ingress.leg_rewrite6", 0)
        return min(relay // 4, guard // 4, legs // 2, self.calls_per_pipe)


def _first_error(log: str) -> str:
    for line in log.splitlines():
        if "error" in line.lower() and "0 errors" not in line:
            return line.strip()[:200]
    return "compiler failed (see compile.log)"


def _final_stages(summary: str) -> tuple[int, int]:
    ing = re.findall(r"Number of stages for ingress table allocation: (\d+)", summary)
    eg = re.findall(r"Number of stages for egress table allocation: (\d+)", summary)
    return (int(ing[-1]) if ing else 0, int(eg[-1]) if eg else 0)


def _gress_of(context: dict[str, object]) -> dict[str, str]:
    tables = context.get("tables", [])
    assert isinstance(tables, list)
    return {str(t["name"]): str(t["direction"]) for t in tables if isinstance(t, dict)}


def _table_uses(log: str, gress: dict[str, str]) -> dict[str, list[TableUse]]:
    """Rows of mau.resources.log's 'Allocated Resource Usage' table."""
    out: dict[str, list[TableUse]] = {}
    if "Allocated Resource Usage" not in log:
        return out
    for line in log.split("Allocated Resource Usage", 1)[1].splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 8 or not cells[1].lstrip("-").isdigit():
            continue
        name, stage = cells[0], int(cells[1])
        if stage < 0:
            continue
        base = name.split("$")[0]
        g = (
            gress.get(name)
            or gress.get(base)
            or ("egress" if name.startswith("Egress") else "ingress")
        )
        use = TableUse(stage, g, int(cells[5]), int(cells[6]), int(cells[7]))
        out.setdefault(name, []).append(use)
    return out


def load(path: Path) -> Profile:
    name = path.name.removeprefix("p4relay-")
    rc_file = path / "compile.rc"
    log_file = path / "compile.log"
    log = log_file.read_text(errors="replace") if log_file.is_file() else ""
    rc = int(rc_file.read_text().split()[0]) if rc_file.is_file() else 0
    metrics = path / "pipe" / "logs" / "metrics.json"
    p = Profile(name, path, ok=rc == 0 and metrics.is_file())
    # build.sh logs the command line (--target tofino2 for Tofino 2 builds).
    t = re.search(r"--target (tofino\d?)\b", log)
    p.target = t.group(1) if t else ("tofino2" if name.endswith("-t2") else "tofino")
    m = re.search(r"compile_s=([\d.]+)", log)
    if rc_file.is_file():
        parts = rc_file.read_text().split()
        p.compile_s = float(parts[1]) if len(parts) > 1 else 0.0
    elif m:
        p.compile_s = float(m.group(1))
    if not p.ok:
        p.error = _first_error(log) if log else f"no compiler output in {path}"
    summary = path / "pipe" / "logs" / "table_summary.log"
    if summary.is_file():
        p.ingress_stages, p.egress_stages = _final_stages(summary.read_text())
        if p.stages > p.max_stages:  # placed, but beyond the pipe: the assembler rejects it
            p.ok = False
            p.error = (
                f"needs {p.ingress_stages} ingress / {p.egress_stages} egress stages"
                f" of {p.max_stages}"
            )
    if metrics.is_file():
        m = json.loads(metrics.read_text())
        mau = m["mau"]
        p.sram, p.tcam, p.map_ram = int(mau["srams"]), int(mau["tcams"]), int(mau["map_rams"])
        phv = m.get("phv", {})
        p.phv_bits = sum(int(c["bits_occupied"]) for c in phv.get("normal", []))
        p.tphv_bits = sum(int(c["bits_occupied"]) for c in phv.get("tagalong", []))
    bfrt = path / "bf-rt.json"
    if bfrt.is_file():
        for t in json.loads(bfrt.read_text())["tables"]:
            if t["name"].startswith(("pipe.Ingress.", "pipe.Egress.")):
                p.sizes[t["name"]] = int(t.get("size", 0))
    resources = path / "pipe" / "logs" / "mau.resources.log"
    context = path / "pipe" / "context.json"
    if resources.is_file():
        gress = _gress_of(json.loads(context.read_text())) if context.is_file() else {}
        p.tables = _table_uses(resources.read_text(errors="replace"), gress)
    return p


def summary_lines(profiles: list[Profile]) -> list[str]:
    head = f"{'profile':12} {'target':8} {'result':6} {'stages in/eg':>12} {'SRAM':>12} {'TCAM':>10} {'map RAM':>12} {'calls/pipe':>10} {'v6':>6}  time"
    lines = [head]
    for p in profiles:
        if not p.ok:
            lines.append(f"{p.name:12} {p.target:8} {'FAIL':6} {p.error}")
            continue
        lines.append(
            f"{p.name:12} {p.target:8} {'ok':6} {p.ingress_stages:>5} / {p.egress_stages:<4} "
            f"{p.sram:>4} ({p.pct(p.sram, SRAM_PER_STAGE):>4}) {p.tcam:>3} ({p.pct(p.tcam, TCAM_PER_STAGE):>4}) "
            f"{p.map_ram:>4} ({p.pct(p.map_ram, MAP_RAM_PER_STAGE):>4}) {p.calls_per_pipe:>10} "
            f"{p.calls6_per_pipe:>6}  {p.compile_s:.0f} s"
        )
    return lines


def _k(n: int) -> str:
    return f"{n // 1024}K" if n % 1024 == 0 else f"{n:,}"


def table_lines(profiles: list[Profile]) -> list[str]:
    lines = [
        "| profile | target | relay / guard / legs per pipe | stages (ingress / egress of the pipe's) "
        "| SRAM blocks | TCAM blocks | map RAM "
        "| PHV bits (normal / tagalong) "
        "| calls per pipe | per 2-pipe switch | per 4-pipe switch "
        "| of them IPv6, per pipe (relay6 / guard6 / legs6) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for p in profiles:
        s = p.sizes
        sizes = (
            f"{_k(s.get('pipe.Ingress.relay', 0))} / {_k(s.get('pipe.Ingress.relay_guard', 0))} / "
            f"{_k(s.get('pipe.Ingress.leg_rewrite', 0))}"
        )
        if len(p.quality_halves) > 1:
            sizes += " (quality registers " + " + ".join(_k(n) for n in p.quality_halves) + ")"
        target = "Tofino 2" if p.target == "tofino2" else "Tofino 1"
        if not p.ok:
            lines.append(
                f"| {p.name} | {target} | {sizes} | does not fit: {p.error} | | | | | | | | |"
            )
            continue
        c = p.calls_per_pipe
        n = p.max_stages
        lines.append(
            f"| {p.name} | {target} | {sizes} | {p.ingress_stages} / {p.egress_stages} of {n} "
            f"| {p.sram} of {SRAM_PER_STAGE * n:,} ({p.pct(p.sram, SRAM_PER_STAGE)}) "
            f"| {p.tcam} of {TCAM_PER_STAGE * n} ({p.pct(p.tcam, TCAM_PER_STAGE)}) "
            f"| {p.map_ram} of {MAP_RAM_PER_STAGE * n} ({p.pct(p.map_ram, MAP_RAM_PER_STAGE)}) "
            f"| {p.phv_bits:,} / {p.tphv_bits:,} "
            f"| {c:,} | {c * PIPES[0]:,} | {c * PIPES[1]:,} | {_v6(p)} |"
        )
    return lines


def _v6(p: Profile) -> str:
    """The IPv6 calls column: up to this many of a pipe's calls are IPv6."""
    s = p.sizes
    if "pipe.Ingress.relay6" not in s:
        return "none (IPv4 only)"
    return (
        f"{p.calls6_per_pipe:,} ({_k(s['pipe.Ingress.relay6'])} / "
        f"{_k(s.get('pipe.Ingress.relay_guard6', 0))} / {_k(s.get('pipe.Ingress.leg_rewrite6', 0))})"
    )


def _short(name: str) -> str:
    return name.removeprefix("Ingress.").removeprefix("Egress.")


def stage_lines(p: Profile) -> list[str]:
    """Per stage: the program's named objects (tables, registers, their action
    and counter RAMs) of each gress, with their SRAM/TCAM there; the compiler's
    own steps (tbl_*, cond-*) are counted, not named."""
    lines = [
        f"stage map, {p.name}:",
        "| stage | ingress | egress | SRAM | TCAM |",
        "|---|---|---|---|---|",
    ]
    for stage in range(max(p.stages, 1)):
        cols: dict[str, list[str]] = {"ingress": [], "egress": []}
        steps = {"ingress": 0, "egress": 0}
        sram = tcam = 0
        for name, uses in sorted(p.tables.items()):
            for u in uses:
                if u.stage != stage:
                    continue
                sram += u.rams
                tcam += u.tcams
                if name.startswith(("Ingress.", "Egress.")):
                    label = _short(name).replace("$action", " (action data)")
                    label = re.sub(r"^relay_sessions\.(\w+)_counter$", r"\1 (counters)", label)
                    cols[u.gress].append(f"{label} {u.rams}" + (f"+{u.tcams}T" if u.tcams else ""))
                else:
                    steps[u.gress] += 1
        for g in cols:
            if steps[g]:
                cols[g].append(f"{steps[g]} steps")
        lines.append(
            f"| {stage} | {', '.join(cols['ingress'])} | {', '.join(cols['egress'])} | {sram} | {tcam} |"
        )
    return lines


def junit(out: Path, suite: str, profiles: list[Profile]) -> None:
    cases = []
    failures = 0
    for p in profiles:
        body = ""
        if not p.ok:
            failures += 1
            log = (
                (p.path / "compile.log").read_text(errors="replace")
                if (p.path / "compile.log").is_file()
                else ""
            )
            body = f'<failure message="{escape(p.error, {chr(34): "&quot;"})}">{escape(log[-4000:])}</failure>'
        cases.append(
            f'<testcase classname="p4.compile" name="{p.name}" time="{p.compile_s:.1f}">{body}</testcase>'
        )
    xml = (
        f'<?xml version="1.0" encoding="utf-8"?>\n<testsuite name="{suite}" tests="{len(profiles)}" '
        f'failures="{failures}" errors="0" skipped="0">\n' + "\n".join(cases) + "\n</testsuite>\n"
    )
    out.write_text(xml)


def program_schema(bfrt: dict[str, object]) -> dict[str, object]:
    """A bf-rt.json without its snapshot tables, tables keyed by name."""
    tables = bfrt.get("tables", [])
    assert isinstance(tables, list)
    return {
        "tables": {
            str(t["name"]): t
            for t in tables
            if isinstance(t, dict) and not str(t.get("table_type", "")).startswith("Snapshot")
        },
        "learn_filters": bfrt.get("learn_filters", []),
    }


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[0] not in {"summary", "table", "stages", "junit", "same-schema"}:
        print(__doc__, file=sys.stderr)
        return 2
    cmd = argv[0]
    if cmd == "same-schema":
        a, b = (json.loads(Path(f).read_text()) for f in argv[1:3])
        return 0 if program_schema(a) == program_schema(b) else 1
    if cmd == "junit":
        if len(argv) < 4:
            print("junit OUT SUITE DIR...", file=sys.stderr)
            return 2
        junit(Path(argv[1]), argv[2], [load(Path(d)) for d in argv[3:]])
        return 0
    profiles = [load(Path(d)) for d in argv[1:]]
    if cmd == "summary":
        lines = summary_lines(profiles)
    elif cmd == "table":
        lines = table_lines(profiles)
    else:
        lines = [line for p in profiles for line in stage_lines(p)]
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
