"""Bring the switch to the desired state, and tell what it took.

One pass reads every managed table back, then per table deletes the entries
the configuration lacks (freeing room first), modifies the ones that differ
and inserts the missing ones; then the managed registers and shaped ports.
The same pass applies a configuration (at connect, after SIGHUP) and repairs
drift (periodically, after a switch restart): with ``drift`` every entry it
had to touch is counted in ``p4relay_controlplane_drift_repaired_total`` and
logged by table and key. A refused entry (a port the switch does not have, a
program without the feature, a full table) is logged and counted and never
stops the rest: the next pass tries it again.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

import structlog
from p4relay_switch import Entry, ReadEntry, SchemaError, SwitchClient, SwitchError
from p4relay_switch.names import (
    IRED_PORT,
    K_EGRESS_PORT,
    REG_IRED_DROP_FLAG,
    REG_IRED_QAVG,
    REG_IRED_QDEPTH_PREV,
)

from p4relay_controlplane import metrics
from p4relay_controlplane.desired import PORT_KEYED, TABLE_ORDER, Desired, Key, describe, key_of

log = structlog.get_logger("p4relay.controlplane")

Kind = Literal["missing", "changed", "extra"]
SHAPING = "tf1.tm.port.sched_shaping"
# A port's iRED state between packets, zeroed when the port goes back to tail
# drop (a drop flag left set would still drop its next packet; the average
# would greet a later setting with an old queue). Its counters are kept: the
# collector counts on from them.
IRED_STATE_REGISTERS = (REG_IRED_DROP_FLAG, REG_IRED_QAVG, REG_IRED_QDEPTH_PREV)


@dataclass
class Report:
    """What one pass did: per table the entries it wrote by kind, and what was refused."""

    repaired: dict[tuple[str, Kind], int] = field(default_factory=dict)
    refused: dict[str, list[tuple[str, str]]] = field(default_factory=dict)  # table -> (key, why)
    # a dry run: what differs, (table, kind, key), nothing written
    differs: list[tuple[str, Kind, str]] = field(default_factory=list)

    def count(self, table: str, kind: Kind, n: int = 1) -> None:
        if n:
            self.repaired[(table, kind)] = self.repaired.get((table, kind), 0) + n

    def refuse(self, table: str, key: str, why: str) -> None:
        self.refused.setdefault(table, []).append((key, why))
        metrics.REFUSED.labels(table).inc()
        log.error("entry_refused", table=table, key=key, reason=why)

    @property
    def touched(self) -> int:
        return sum(self.repaired.values())

    def summary(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for (t, k), n in sorted(self.repaired.items()):
            out.setdefault(t, {})[k] = n
        return out


def _differs(want: Entry, got: ReadEntry) -> bool:
    if want.action != got.action:
        return True
    return any(got.data.get(name) != value for name, value in want.data.items())


class Reconciler:
    """Passes over one switch; ``ports`` of the switch are read once per pass.
    ``dry_run``: read and compare only (`--diff`), nothing is written."""

    def __init__(self, client: SwitchClient, *, dry_run: bool = False) -> None:
        self.client = client
        self.dry_run = dry_run

    async def run(self, want: Desired, *, drift: bool) -> Report:
        report = Report()
        started = time.monotonic()
        ports = set(await self.client.ports())
        for table in sorted(want.tables, key=_order):
            await self._table(table, want.tables[table], ports, report, drift=drift)
        for reg, values in want.registers.items():
            await self._register(reg, values, ports, report, drift=drift)
        await self._shaping(want.shaping, ports, report, drift=drift)
        metrics.RECONCILE_SECONDS.observe(time.monotonic() - started)
        return report

    # ---------------------------------------------------------------- tables

    async def _table(
        self,
        table: str,
        want: Mapping[Key, Entry],
        ports: set[int],
        report: Report,
        *,
        drift: bool,
    ) -> None:
        try:
            self.client.schema.table(table)
        except SchemaError:
            for k in want:
                report.refuse(table, describe(k), "the switch program does not have this table")
            return
        wanted = dict(want)
        port_key = PORT_KEYED.get(table)
        if port_key is not None:
            for k, e in list(wanted.items()):
                p = e.key.get(port_key)
                if isinstance(p, int) and p not in ports:
                    report.refuse(table, describe(k), f"port {p} is not a port of this switch")
                    del wanted[k]
        have = {
            key_of(e.key): e
            for e in await self.client.read(table, from_hw=False)
            if not e.is_default
        }
        extra = [k for k in have if k not in want]
        changed = [k for k in wanted if k in have and _differs(wanted[k], have[k])]
        missing = [k for k in wanted if k not in have]
        if extra:
            await self._write(table, "extra", [Entry(dict(k)) for k in extra], report, drift)
            if table == IRED_PORT and not self.dry_run:
                await self._ired_off([dict(k).get(K_EGRESS_PORT) for k in extra], report)
        if changed:
            await self._write(table, "changed", [wanted[k] for k in changed], report, drift)
        if missing:
            await self._write(table, "missing", [wanted[k] for k in missing], report, drift)
        metrics.ENTRIES.labels(table).set(len(want))

    async def _write(
        self, table: str, kind: Kind, entries: list[Entry], report: Report, drift: bool
    ) -> None:
        if self.dry_run:
            report.differs += [(table, kind, describe(key_of(e.key))) for e in entries]
            return
        op = {
            "extra": self.client.delete,
            "changed": self.client.modify,
            "missing": self.client.insert,
        }[kind]
        try:
            await op(table, entries)
            done = entries
        except SwitchError:
            # Entry by entry: which ones the switch refuses, the rest written.
            done = []
            for e in entries:
                try:
                    await op(table, [e])
                    done.append(e)
                except SwitchError as exc:
                    report.refuse(table, describe(key_of(e.key)), str(exc))
        report.count(table, kind, len(done))
        for e in done:
            key = describe(key_of(e.key))
            if drift:
                metrics.DRIFT_REPAIRED.labels(table, kind).inc()
                log.warning("drift_repaired", table=table, key=key, kind=kind)
            else:
                log.info("entry_set", table=table, key=key, kind=kind)

    async def _ired_off(self, ports: list[object], report: Report) -> None:
        """Ports back to tail drop: their drop flag and queue average zeroed."""
        for p in ports:
            if not isinstance(p, int):
                continue
            try:
                for reg in IRED_STATE_REGISTERS:
                    await self.client.write_register(reg, {p: 0})
            except SwitchError as exc:
                report.refuse(IRED_PORT, f"{K_EGRESS_PORT}={p}", f"state not zeroed: {exc}")

    # ---------------------------------------------------------------- registers

    async def _register(
        self, reg: str, values: Mapping[int, int], ports: set[int], report: Report, *, drift: bool
    ) -> None:
        idx = [i for i in values if i in ports]
        if not idx:
            return
        try:
            got = await self.client.read_register(reg, idx)
        except SchemaError:
            return  # the table's own refusal says why
        fix = {i: values[i] for i in idx if any(v != values[i] for v in got.get(i, [None]))}
        if not fix:
            return
        if self.dry_run:
            report.differs += [(reg, "changed", f"$REGISTER_INDEX={i}") for i in fix]
            return
        try:
            await self.client.write_register(reg, fix)
        except SwitchError as exc:
            report.refuse(reg, ",".join(map(str, fix)), str(exc))
            return
        report.count(reg, "changed", len(fix))
        for i in fix:
            if drift:
                metrics.DRIFT_REPAIRED.labels(reg, "changed").inc()
                log.warning("drift_repaired", table=reg, key=f"$REGISTER_INDEX={i}", kind="changed")

    # ---------------------------------------------------------------- shaping

    async def _shaping(
        self, want: Mapping[int, tuple[int, int]], ports: set[int], report: Report, *, drift: bool
    ) -> None:
        if not want:
            return
        for port, (rate, burst) in sorted(want.items()):
            key = f"dev_port={port}"
            if port not in ports:
                report.refuse(SHAPING, key, f"port {port} is not a port of this switch")
                continue
            try:
                # Tofino: the traffic manager's tables are per pipe (dev_port >> 7).
                tofino = "tf1.tm.port.cfg" in self.client.schema.tables
                got = await self.client.read(
                    SHAPING, [{"dev_port": port}], from_hw=False, pipe=port >> 7 if tofino else None
                )
                data = got[0].data if got else {}
                # A target that does not keep the burst (the softswitch) reads it as 0.
                held = data.get("max_burst_size") or burst
                if (data.get("max_rate"), held) == (rate, burst):
                    continue
                if self.dry_run:
                    report.differs.append((SHAPING, "changed", key))
                    continue
                await self.client.set_port_shaping(
                    port, rate, max_burst_bytes=burst, enable=rate > 0
                )
            except SwitchError as exc:
                report.refuse(SHAPING, key, str(exc))
                continue
            report.count(SHAPING, "changed")
            if drift:
                metrics.DRIFT_REPAIRED.labels(SHAPING, "changed").inc()
                log.warning("drift_repaired", table=SHAPING, key=key, kind="changed")
            else:
                log.info("entry_set", table=SHAPING, key=key, kind="changed")


def _order(t: str) -> int:
    return TABLE_ORDER.index(t) if t in TABLE_ORDER else len(TABLE_ORDER)
