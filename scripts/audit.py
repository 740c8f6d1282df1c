"""Offline dependency audit (make lint): the locked Rust crates against the RustSec
advisory database, the locked Python packages against the PyPA advisory database.

Both databases are snapshots shipped beside the checkout (``../shared/vendor``), unpacked
once into ``build/advisory-db/``. Every advisory that matches a locked package fails the
audit unless ``scripts/audit-exceptions.toml`` names it with a reason. Each database's
date is printed: a clean result means "no advisory known on that date".

pip-audit cannot read a local database, so the Python side matches the OSV records
(package name, ECOSYSTEM version ranges, listed versions) itself; npm has no offline
database here at all.

    uv run python scripts/audit.py [--vendor DIR]
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tarfile
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from packaging.version import InvalidVersion, Version

ROOT = Path(__file__).resolve().parent.parent
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's: the same, ten times faster
RUSTSEC_TARBALL = "rustsec-advisory-db-2026-08-21.tar.gz"
PYPA_TARBALL = "pypa-advisory-database-2024-10-10.tar.gz"
EXCEPTIONS = ROOT / "scripts" / "audit-exceptions.toml"
CACHE = ROOT / "build" / "advisory-db"


class AuditError(Exception):
    """The audit could not run (a database, the tool or a lock file is missing or unreadable)."""


@dataclass(frozen=True)
class Finding:
    ecosystem: str  # "rust" | "python"
    advisory: str
    package: str
    version: str
    summary: str


@dataclass(frozen=True)
class Exception_:
    ecosystem: str
    advisory: str
    package: str
    reason: str


def unpack(tarball: Path, top: str) -> Path:
    """The database directory ``top`` of ``tarball``, unpacked once under build/."""
    if not tarball.is_file():
        raise AuditError(
            f"advisory database {tarball} not found (../shared/vendor beside the checkout)"
        )
    dest = CACHE / tarball.name.removesuffix(".tar.gz")
    done = dest / ".unpacked"
    if not done.exists():
        shutil.rmtree(dest, ignore_errors=True)
        dest.mkdir(parents=True)
        with tarfile.open(tarball) as tf:
            tf.extractall(dest, filter="data")  # "data": no links or paths out of dest
        done.touch()
    db = dest / top
    if not db.is_dir():
        raise AuditError(f"{tarball.name} holds no {top}/ directory")
    return db


def load_exceptions(path: Path) -> list[Exception_]:
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise AuditError(f"{path}: {e}") from e
    out = []
    for i, raw in enumerate(data.get("exception", [])):
        missing = [k for k in ("ecosystem", "advisory", "package", "reason") if not raw.get(k)]
        if missing:
            raise AuditError(f"{path}: exception #{i + 1} lacks {', '.join(missing)}")
        if raw["ecosystem"] not in ("rust", "python"):
            raise AuditError(f"{path}: exception #{i + 1}: ecosystem is rust or python")
        if len(str(raw["reason"]).split()) < 4:
            raise AuditError(f"{path}: exception {raw['advisory']}: give a reason, in words")
        out.append(
            Exception_(raw["ecosystem"], raw["advisory"], _norm(raw["package"]), raw["reason"])
        )
    return out


# --- Rust: cargo audit against the RustSec snapshot ------------------------------------


def audit_rust(vendor: Path) -> tuple[str, list[Finding]]:
    db = unpack(vendor / RUSTSEC_TARBALL, "advisory-db")
    date = _git(db, "log", "-1", "--format=%cs") or "unknown"
    count = sum(1 for _ in (db / "crates").glob("*/RUSTSEC-*.md"))
    head = f"RustSec advisory database: snapshot of {date}, {count} crate advisories"
    if shutil.which("cargo-audit") is None:
        raise AuditError("cargo-audit is not installed (make setup installs it)")
    lock = ROOT / "switch" / "Cargo.lock"
    # --stale: the snapshot is older than cargo-audit's 90-day freshness limit; its
    # date is printed instead. --no-fetch: offline, never touch the network.
    proc = subprocess.run(
        ["cargo", "audit", "--db", str(db), "--no-fetch", "--stale", "--json", "--file", str(lock)],
        capture_output=True,
        text=True,
        check=False,
    )
    try:
        report: dict[str, Any] = json.loads(proc.stdout)
    except json.JSONDecodeError as e:
        raise AuditError(f"cargo audit failed (rc {proc.returncode}): {proc.stderr.strip()}") from e
    findings = []
    crates = report.get("lockfile", {}).get("dependency-count", "?")
    for v in report.get("vulnerabilities", {}).get("list", []):
        findings.append(_rust_finding(v))
    # Informational advisories (unmaintained, unsound, notice) are advisories too.
    for kind, items in (report.get("warnings") or {}).items():
        for w in items:
            if w.get("advisory"):
                findings.append(_rust_finding(w, kind))
    return f"{head}; {crates} locked crates (switch/Cargo.lock)", findings


def _rust_finding(entry: dict[str, Any], kind: str = "vulnerability") -> Finding:
    adv, pkg = entry["advisory"], entry["package"]
    return Finding("rust", adv["id"], pkg["name"], pkg["version"], f"{kind}: {adv['title']}")


def _git(repo: Path, *args: str) -> str:
    proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
    return proc.stdout.strip() if proc.returncode == 0 else ""


# --- Python: uv.lock against the PyPA OSV records --------------------------------------


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def locked_python_packages(lock: Path) -> dict[str, str]:
    """name → version of every package uv.lock takes from a registry (not ours)."""
    try:
        data = tomllib.loads(lock.read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise AuditError(f"{lock}: {e}") from e
    return {
        _norm(p["name"]): p["version"]
        for p in data.get("package", [])
        if "registry" in p.get("source", {}) and "version" in p
    }


def affected(version: Version, affected_entry: dict[str, Any]) -> bool:
    """Whether ``version`` is inside one of the OSV entry's ECOSYSTEM ranges or listed."""
    listed = {str(v) for v in affected_entry.get("versions") or []}
    if str(version) in listed or any(_same(version, v) for v in listed):
        return True
    for rng in affected_entry.get("ranges") or []:
        if rng.get("type") != "ECOSYSTEM":
            continue  # GIT ranges name commits, not releases
        start: Version | None = None
        for ev in rng.get("events") or []:
            if "introduced" in ev:
                start = _ver(ev["introduced"], floor=True)
            elif start is not None and "fixed" in ev:
                fixed = _ver(ev["fixed"])
                if fixed is not None and start <= version < fixed:
                    return True
                start = None
            elif start is not None and "last_affected" in ev:
                last = _ver(ev["last_affected"])
                if last is not None and start <= version <= last:
                    return True
                start = None
        if start is not None and version >= start:
            return True
    return False


def _same(version: Version, text: str) -> bool:
    v = _ver(text)
    return v is not None and v == version


def _ver(text: object, floor: bool = False) -> Version | None:
    if floor and str(text) == "0":
        return Version("0")
    try:
        return Version(str(text))
    except InvalidVersion:
        return None


def load_records(db: Path) -> list[dict[str, Any]]:
    records = []
    for path in sorted((db / "vulns").glob("*/*.yaml")):
        try:
            rec = yaml.load(path.read_text(), Loader=_LOADER)
        except (OSError, yaml.YAMLError) as e:
            raise AuditError(f"{path}: {e}") from e
        if not isinstance(rec, dict) or "id" not in rec:
            raise AuditError(f"{path}: not an OSV record")
        records.append(rec)
    return records


def match(locked: dict[str, str], records: list[dict[str, Any]]) -> list[Finding]:
    """The records (not withdrawn) that affect a locked package's version."""
    findings = []
    for rec in records:
        if rec.get("withdrawn"):
            continue
        for entry in rec.get("affected") or []:
            pkg = entry.get("package") or {}
            name = _norm(str(pkg.get("name", "")))
            if pkg.get("ecosystem") != "PyPI" or name not in locked:
                continue
            if affected(Version(locked[name]), entry):
                summary = " ".join(str(rec.get("summary") or rec.get("details", "")).split())
                summary = f"{summary[:100]}{'…' if len(summary) > 100 else ''}"
                if aliases := ", ".join(rec.get("aliases") or []):
                    summary += f" ({aliases})"
                findings.append(Finding("python", rec["id"], name, locked[name], summary))
                break
    return findings


# A known advisory the matcher must find (and its fixed release it must not): a clean
# result then means "nothing matches", not "nothing was read".
CANARY = ("PYSEC-2023-48", "starlette", "0.24.0", "0.25.0")


def audit_python(vendor: Path) -> tuple[str, list[Finding]]:
    db = unpack(vendor / PYPA_TARBALL, "pypa-advisory-database")
    locked = locked_python_packages(ROOT / "uv.lock")
    records = load_records(db)
    advisory, package, bad, good = CANARY
    found_bad = {f.advisory for f in match({package: bad}, records)}
    found_good = {f.advisory for f in match({package: good}, records)}
    if advisory not in found_bad or advisory in found_good:
        raise AuditError(f"the matcher misreads {advisory} ({package} {bad} vs {good})")
    newest = max((str(r.get("modified", ""))[:10] for r in records), default="unknown")
    head = (
        f"PyPA advisory database: snapshot of {PYPA_TARBALL[-17:-7]} (newest record modified "
        f"{newest}), {len(records)} records; {len(locked)} locked packages (uv.lock)"
    )
    return head, match(locked, records)


# --- Verdict -----------------------------------------------------------------------------


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument(
        "--vendor",
        type=Path,
        default=ROOT.parent / "shared" / "vendor",
        help="directory holding the database tarballs (default: ../shared/vendor)",
    )
    args = ap.parse_args()
    try:
        exceptions = load_exceptions(EXCEPTIONS)
        results = [audit_rust(args.vendor), audit_python(args.vendor)]
    except AuditError as e:
        print(f"audit: {e}", file=sys.stderr)
        return 1
    excused = {(x.ecosystem, x.advisory, x.package): x for x in exceptions}
    used: set[tuple[str, str, str]] = set()
    failed = 0
    for head, findings in results:
        print(f"audit: {head}")
        for f in findings:
            key = (f.ecosystem, f.advisory, _norm(f.package))
            if key in excused:
                used.add(key)
                print(f"  excepted {f.advisory} {f.package} {f.version}: {excused[key].reason}")
            else:
                failed += 1
                print(f"  ADVISORY {f.advisory} {f.package} {f.version}: {f.summary}")
        if not findings:
            print("  no advisory matches a locked package")
    for key in excused.keys() - used:
        print(f"audit: exception {key[1]} ({key[2]}) matches nothing any more: remove it")
    if failed:
        print(
            f"audit: {failed} advisory(ies) without an exception: upgrade the package "
            f"(cargo update -p / uv lock -P) or write an exception with its reason "
            f"in {EXCEPTIONS.relative_to(ROOT)}",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
