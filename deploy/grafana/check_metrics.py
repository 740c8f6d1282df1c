"""Every metric a Grafana dashboard or a Prometheus rule file queries must be
one the components export. Exported names come from their code: the
prometheus_client declarations (server, collector, rtpagent, controlplane), the softswitch's
metric families (Rust) and the server's fleet metrics (`/api/v1/overview/metrics`).

    python deploy/grafana/check_metrics.py deploy/grafana/p4relay.json deploy/prometheus/alerts.yml

PromQL is reduced by hand (strings, label matchers, ranges, grouping clauses,
functions and keywords removed) rather than parsed: no maintained Python
PromQL parser exists, and what is left after the reduction is metric names.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import TypedDict

import yaml

ROOT = Path(__file__).resolve().parents[2]
PY_SOURCES = ["server/src", "collector/src", "rtpagent/src", "switch/controlplane/src"]
RUST_SOURCES = ["switch/softswitch/src/metrics.rs"]
FLEET_SOURCE = "server/src/p4relay_server/services/queries/fleet_metrics.py"

_PY_DECL = re.compile(r"\b(Counter|Gauge|Histogram|Summary)\(\s*\"([a-zA-Z_:][a-zA-Z0-9_:]*)\"")
_RUST_NAME = re.compile(r"\"(p4relay_[a-z0-9_]+)(?:\{|\")")
_FLEET_NAME = re.compile(r"\"(p4relay_[a-z0-9_]+)\"")
# Always there: Prometheus' own per-target series.
BUILTIN = {"up", "scrape_duration_seconds", "scrape_samples_scraped"}

KEYWORDS = {
    "by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless",
    "offset", "bool", "le", "inf", "nan", "atan2",
}  # fmt: skip


def exported() -> set[str]:
    names = set(BUILTIN)
    for src in PY_SOURCES:
        for f in sorted((ROOT / src).rglob("*.py")):
            for kind, name in _PY_DECL.findall(f.read_text()):
                base = name.removesuffix("_total") if kind == "Counter" else name
                if kind == "Counter":
                    names |= {f"{base}_total", f"{base}_created"}
                elif kind in ("Histogram", "Summary"):
                    names |= {name, f"{name}_bucket", f"{name}_sum", f"{name}_count"}
                else:
                    names.add(name)
    for src in RUST_SOURCES:
        names |= set(_RUST_NAME.findall((ROOT / src).read_text()))
    names |= set(_FLEET_NAME.findall((ROOT / FLEET_SOURCE).read_text()))
    return names


def metric_names(expr: str) -> set[str]:
    """Metric names an expression reads."""
    e = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'', '""', expr)  # strings
    e = re.sub(r"\{[^}]*\}", " ", e)  # label matchers
    e = re.sub(r"\[[^\]]*\]", " ", e)  # ranges, subqueries
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", e)
    e = re.sub(r"\boffset\s+-?\d+[smhdwy]", " ", e)
    out = set()
    for m in re.finditer(r"[a-zA-Z_:][a-zA-Z0-9_:]*", e):
        word = m.group(0)
        rest = e[m.end() :].lstrip()
        if rest.startswith("(") or word.lower() in KEYWORDS:
            continue  # a function or aggregation, or a keyword
        if re.fullmatch(r"\d+[smhdwy]?", word) or word.startswith("$"):
            continue
        out.add(word)
    return out


def dashboard_exprs(doc: dict[str, object]) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []

    def walk(panels: object) -> None:
        if not isinstance(panels, list):
            return
        for p in panels:
            if not isinstance(p, dict):
                continue
            for t in p.get("targets") or []:
                if isinstance(t, dict) and isinstance(t.get("expr"), str):
                    found.append((str(p.get("title", "?")), t["expr"]))
            walk(p.get("panels"))

    walk(doc.get("panels"))
    return found


class Rule(TypedDict, total=False):
    alert: str
    record: str
    expr: str


class RuleGroup(TypedDict, total=False):
    name: str
    rules: list[Rule]


class RuleFile(TypedDict, total=False):
    """A Prometheus rule file, as far as it is read here."""

    groups: list[RuleGroup]


def rule_exprs(doc: RuleFile) -> tuple[list[tuple[str, str]], set[str]]:
    found: list[tuple[str, str]] = []
    recorded: set[str] = set()
    for g in doc.get("groups") or []:
        for r in g.get("rules") or []:
            found.append((r.get("alert") or r.get("record") or "?", r["expr"]))
            if "record" in r:
                recorded.add(r["record"])
    return found, recorded


def check(paths: list[Path]) -> list[str]:
    known = exported()
    problems: list[str] = []
    for path in paths:
        text = path.read_text()
        recorded: set[str] = set()
        if path.suffix == ".json":
            exprs = dashboard_exprs(json.loads(text))
        else:
            exprs, recorded = rule_exprs(yaml.safe_load(text))
        if not exprs:
            problems.append(f"{path}: no queries found")
        for where, expr in exprs:
            for name in sorted(metric_names(expr) - known - recorded):
                problems.append(f"{path}: {where}: {name} is not exported by any component")
    return problems


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    problems = check([Path(a) for a in argv])
    for p in problems:
        print(p, file=sys.stderr)
    if not problems:
        print(f"check_metrics: every query names an exported metric ({', '.join(argv)})")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
