"""The daemon of one switch: connect, apply the configuration, keep it.

- At connect (and reconnect after a switch restart) one pass (reconcile.py)
  brings every managed table to the configuration.
- Every `reconcile_interval_s` a pass reads the switch back and repairs what
  differs (drift: another client's write, a lost entry), counted and logged.
- A reload (SIGHUP) swaps in a configuration that validated whole and applies
  it; one that does not validate is refused and the running one stays.
- Reroute digests are turned into events and moved flows brought back
  (reroute.py), every `reroute.poll_ms`.
One pass at a time: a reload, a reconnect and the timer never interleave
their writes.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable

import structlog
from p4relay_switch import (
    Backoff,
    Digest,
    Reconnected,
    Subscription,
    SwitchClient,
    SwitchError,
)

from p4relay_controlplane import metrics
from p4relay_controlplane.config import Settings
from p4relay_controlplane.desired import Desired, desired
from p4relay_controlplane.int_loop import IntLoop
from p4relay_controlplane.reconcile import Reconciler, Report
from p4relay_controlplane.reroute import RerouteControl, Submit

log = structlog.get_logger("p4relay.controlplane")

# Settings a reload applies; the others (the switch's address, the metrics
# port, the server) need a restart.
LIVE = {"reconcile_interval_s", "ports", "nexthops", "routes", "reroute", "ired", "int"}
# the INT loop's socket is bound once: a changed listen address needs a restart
LIVE |= {"int_loop"}


class Daemon:
    """`submit` takes reroute events to the server; `flush` re-sends what it
    could not deliver (called at every reconcile tick)."""

    def __init__(
        self,
        cfg: Settings,
        submit: Submit | None = None,
        flush: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.cfg = cfg
        self.want: Desired = desired(cfg)
        self.client = SwitchClient(
            cfg.grpc_address,
            client_id=cfg.client_id,
            timeout_s=cfg.timeout_s,
            connect_timeout_s=cfg.timeout_s,
            subscription=Subscription(learn=True, idle_timeout=False, port_status=False),
            backoff=Backoff(max_s=min(10.0, cfg.reconcile_interval_s)),
        )
        self.reconciler = Reconciler(self.client)
        self.submit = submit
        self.flush = flush
        self.reroute = (
            RerouteControl(cfg.reroute, cfg.switch, self.client, submit) if cfg.reroute else None
        )
        self.int_loop = (
            IntLoop(cfg.int_loop, cfg.int.switch_id, self.reroute)
            if cfg.int_loop is not None and cfg.int is not None and self.reroute is not None
            else None
        )
        self._lock = asyncio.Lock()
        self._applied = False  # the running configuration went through one pass
        self.last_report: Report | None = None

    # ---------------------------------------------------------------- passes

    async def converge(self, *, drift: bool) -> Report | None:
        """One pass; ``drift``: what it repairs is drift (counted), unless the
        running configuration was never applied yet. None: the switch is away."""
        async with self._lock:
            counted = drift and self._applied
            try:
                report = await self.reconciler.run(self.want, drift=counted)
            except SwitchError as e:
                metrics.RECONCILES.labels("failed").inc()
                log.warning("reconcile_failed", error=str(e))
                return None
            self._applied = True
            self.last_report = report
            if report.refused:
                metrics.RECONCILES.labels("failed").inc()
            else:
                metrics.RECONCILES.labels("repaired" if report.touched else "clean").inc()
            self._ired_gauges(report)
            if not counted:
                log.info("config_applied", written=report.summary(), refused=_refused(report))
            elif report.touched:
                log.warning("drift_found", repaired=report.summary(), refused=_refused(report))
            return report

    def _ired_gauges(self, report: Report) -> None:
        refused = {k for k, _ in report.refused.get("pipe.Egress.ired_port", [])}
        for p in self.cfg.ired or []:
            bad = f"eg_intr_md.egress_port={p.port}" in refused
            metrics.IRED_SET.labels(str(p.port)).set(0 if bad else 1)

    async def _at_connect(self, *, restarted: bool) -> None:
        metrics.CONNECTED.set(1)
        await self.converge(drift=restarted)
        if self.reroute is not None:
            try:
                await self.reroute.at_connect()
            except SwitchError as e:
                log.warning("reroute_state_unread", error=str(e))

    # ---------------------------------------------------------------- reload

    async def reload(self, cfg: Settings) -> str:
        """Applies a new configuration (already validated whole); returns the
        result: applied, deferred (switch away) or failed (something refused)."""
        restart = sorted(
            k
            for k in Settings.model_fields
            if k not in LIVE and getattr(cfg, k) != getattr(self.cfg, k)
        )
        if restart:
            log.warning("config_reload_needs_restart", settings=restart)
        async with self._lock:
            before = {p.port for p in self.cfg.ired or []}
            self.cfg = self.cfg.model_copy(update={k: getattr(cfg, k) for k in LIVE})
            self.want = desired(self.cfg)
            self._applied = False
            for port in before - {p.port for p in self.cfg.ired or []}:
                with contextlib.suppress(KeyError):  # no series for a port not configured
                    metrics.IRED_SET.remove(str(port))
            if self.cfg.reroute is None:
                self.reroute = None
            elif self.reroute is None:
                self.reroute = RerouteControl(
                    self.cfg.reroute, self.cfg.switch, self.client, self.submit
                )
            else:
                self.reroute.configure(self.cfg.reroute)
            self._reload_int_loop()
        if not self.client.connected:
            result = "deferred"
        else:
            report = await self.converge(drift=False)
            result = "failed" if report is None or report.refused else "applied"
            if self.reroute is not None:
                try:
                    await self.reroute.at_connect()  # slots of removed watches back
                except SwitchError as e:
                    log.warning("reroute_state_unread", error=str(e))
        metrics.RELOADS.labels(result).inc()
        log.info("config_reloaded", result=result)
        return result

    def _reload_int_loop(self) -> None:
        """The INT loop follows the reloaded reroute section and thresholds; its
        socket stays bound (a new listen address, or a loop turned on, needs a
        restart; turned off, it stops at once)."""
        c, loop = self.cfg, self.int_loop
        if c.int_loop is None or c.int is None or self.reroute is None:
            if loop is not None:
                loop.close()
                self.int_loop = None
                if self.reroute is not None:
                    self.reroute.hop_clear_since = None
                log.info("int_loop_stopped")
            return
        if loop is None:
            log.warning("config_reload_needs_restart", settings=["int_loop"])
            return
        if c.int_loop.listen != loop.cfg.listen:
            log.warning("config_reload_needs_restart", settings=["int_loop.listen"])
        loop.reroute = self.reroute
        self.reroute.hop_clear_since = loop.clear_since
        loop.configure(c.int_loop.model_copy(update={"listen": loop.cfg.listen}), c.int.switch_id)

    # ---------------------------------------------------------------- running

    async def _wait(self, stop: asyncio.Event, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=max(0.0, seconds))

    async def _connect(self, stop: asyncio.Event) -> bool:
        attempt = 0
        while not stop.is_set():
            try:
                await self.client.connect()
                return True
            except SwitchError as e:
                log.warning("switch_unavailable", address=self.cfg.grpc_address, error=str(e))
                await self._wait(stop, self.client.backoff.delay(attempt))
                attempt += 1
        return False

    async def run(self, stop: asyncio.Event) -> None:
        """Until `stop`: connect (retrying), apply, reconcile, hear digests."""
        pump: asyncio.Task[None] | None = None
        try:
            if not await self._connect(stop):
                return
            await self._at_connect(restarted=False)
            if self.int_loop is not None:
                try:
                    await self.int_loop.start()
                except OSError as e:
                    log.error(
                        "int_loop_listen_failed", listen=self.int_loop.cfg.listen, error=str(e)
                    )
                    self.int_loop = None
            pump = asyncio.create_task(self._pump(), name="controlplane-notifications")
            last = time.monotonic()
            while not stop.is_set():
                step = self.cfg.reconcile_interval_s
                if self.reroute is not None:
                    step = min(step, self.reroute.cfg.poll_ms / 1000)
                due = last + self.cfg.reconcile_interval_s - time.monotonic()
                await self._wait(stop, min(step, due))
                if stop.is_set():
                    break
                up = self.client.connected
                metrics.CONNECTED.set(1 if up else 0)
                if not up:
                    continue
                if self.reroute is not None:
                    try:
                        await self.reroute.check_returns()
                    except SwitchError as e:
                        log.warning("reroute_return_check_failed", error=str(e))
                if time.monotonic() - last >= self.cfg.reconcile_interval_s:
                    await self.converge(drift=True)
                    last = time.monotonic()
                    if self.flush is not None:
                        await self.flush()  # events the server did not take yet
        finally:
            if self.int_loop is not None:
                self.int_loop.close()
            if pump is not None:
                pump.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await pump
            await self.client.close()
            metrics.CONNECTED.set(0)

    async def _pump(self) -> None:
        async for n in self.client.notifications():
            try:
                if isinstance(n, Digest) and self.reroute is not None:
                    await self.reroute.on_digest(n)
                elif isinstance(n, Reconnected):
                    log.warning("switch_reconnected", attempts=n.attempt)
                    await self._at_connect(restarted=True)
            except SwitchError as e:
                log.warning("notification_failed", error=str(e))


def _refused(report: Report) -> dict[str, list[str]]:
    return {t: [f"{k}: {why}" for k, why in items] for t, items in report.refused.items()}
