"""Keep the switch's entries equal to what the sessions need.

`Offloader` wires the jobs that do it, each in its own module: the planner
(`planner.py`: which state, which entries, reconciliation against the
switch), the record of what is installed (`installed.py`, with guard
ownership in `guards.py`), the install writer (`writer.py`), the reaper of
ended sessions (`reaper.py`) and the switch's learn and idle notifications
(`switch_events.py`). The control path only marks sessions: it never waits
on the switch.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable

import structlog
from p4relay_switch import FlowKey, GuardKey, LearnEvent, RelayIdle

from . import metrics
from .drain import Drain
from .guards import GuardRegistry
from .installed import Installed, LiveReading
from .learning import Learner, LearnPolicy
from .planner import DEFAULT_NAT_NETS, Plan, Planner, PortBinding
from .reaper import Reaper
from .state import OffloadState, Session, SessionTable
from .switch_events import SwitchEventHandler
from .switchport import OffloadRefused, Switch, SwitchDown, SwitchUp
from .writer import InstallWriter

log = structlog.get_logger("rtpagent.offload")

Listener = Callable[[str, Session, dict[str, object]], None]
ROUTE_WAIT_S = 0.25  # routes re-read this often while calls wait for one
# Switch notifications handled per event-loop turn (an idle sweep brings
# thousands at once; commands are served between turns).
EVENTS_PER_TURN = 32


class Offloader:
    def __init__(
        self,
        table: SessionTable,
        switch: Switch,
        *,
        legs: int = 65536,
        idle_ttl_ms: int = 5000,
        nat_nets: Iterable[str] = DEFAULT_NAT_NETS,
        latch_always: bool = False,
        enabled: bool = True,
        guard: bool = True,
        learn_policy: LearnPolicy | str = LearnPolicy.STRICT,
        learn_window_ms: int = 2000,
        port_binding: PortBinding | str = PortBinding.ROUTE,
        route_refresh_s: float = 10.0,
    ) -> None:
        self.table = table
        self.switch = switch
        self.planner = Planner(
            nat_nets=nat_nets,
            latch_always=latch_always,
            enabled=enabled,
            guard=guard,
            port_binding=port_binding,
        )
        self.listeners: list[Listener] = []
        self.installed = Installed(switch, legs, idle_ttl_ms)
        drain = self._drain = Drain()
        drain.watch(self._awaiting_first_routes)
        self.writer = InstallWriter(table, self.installed, self.planner, self.emit, drain)
        self.reaper = Reaper(
            self.installed,
            self.emit,
            drain,
            writing=self.writer.writing.__contains__,
            ended=self._ended,
        )
        self.writer.after_round = self.reaper.wake
        self.installed.on_guard_taken = self.writer.wake
        self.learner = Learner(LearnPolicy(learn_policy), learn_window_ms / 1000.0)
        self.events = SwitchEventHandler(self, self.learner)
        self.route_refresh_s = route_refresh_s
        # (relay addr, relay port) -> (session uid, stream index, rtcp)
        self.ports: dict[tuple[str, int], tuple[str, int, bool]] = {}
        self._port_keys: dict[str, set[tuple[str, int]]] = {}
        self._tasks: list[asyncio.Task[None]] = []
        # Set when a call waits on RTPProxy for its route: the routes are read often.
        self._route_wanted = asyncio.Event()

    # ---------------------------------------------------------------- lifecycle
    def start(self) -> None:
        jobs = {
            "offload-writer": self.writer.run(),
            "offload-reaper": self.reaper.run(),
            "switch-events": self._switch_events(),
        }
        if self.planner.port_binding is PortBinding.ROUTE:
            jobs["switch-routes"] = self._routes_loop()
        self._tasks = [asyncio.create_task(job, name=name) for name, job in jobs.items()]

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t

    async def drained(self) -> None:
        """Wait until every change so far has reached the switch."""
        await self._drain.drained()

    async def drained_or_timeout(self, seconds: float) -> None:
        try:
            await asyncio.wait_for(self.drained(), seconds)
        except TimeoutError:
            log.warning(
                "switch_work_pending_at_stop",
                dirty=len(self.writer.dirty),
                ending=len(self.reaper.ending),
            )

    def emit(self, kind: str, s: Session, **payload: object) -> None:
        if kind == "fallback" and payload.get("reason") == "no_ingress_route":
            self._route_wanted.set()
        for cb in self.listeners:
            try:
                cb(kind, s, payload)
            except Exception:  # a reporting bug must not break the control path
                log.exception("listener_failed", kind=kind)

    # ---------------------------------------------------------------- control path hooks
    def touch(self, s: Session) -> None:
        self._index_ports(s)
        self.writer.mark(s)

    def end(self, s: Session) -> None:
        self.writer.dirty.pop(s.uid, None)
        self.reaper.end(s)

    def _index_ports(self, s: Session) -> None:
        keys = self._port_keys.setdefault(s.uid, set())
        for i, st in enumerate(s.streams):
            if st.port and st.laddr:
                for k, rtcp in (((st.laddr, st.port), False), ((st.laddr, st.port + 1), True)):
                    self.ports[k] = (s.uid, i, rtcp)
                    keys.add(k)
                    self.installed.take_guard(GuardKey(*k), s.uid)

    def _ended(self, s: Session) -> None:
        for key in self._port_keys.pop(s.uid, ()):
            if self.ports.get(key, ("",))[0] == s.uid:
                del self.ports[key]
        self.learner.forget(s.uid)

    def restore(self, s: Session) -> None:
        """Take back a journalled session after a restart: its ports, and if it
        was offloaded its legs, plan and guards as installed (the switch is
        reconciled against them at the next connect)."""
        if (
            s.state is OffloadState.OFFLOADED
            and s.legs
            and any(st.ingress_port is None for st in s.streams)
        ):
            # Journalled without its ports: planned afresh once connected.
            s.state, s.legs = OffloadState.PENDING, None
            self.writer.mark(s)
        if s.state is OffloadState.OFFLOADED and s.legs:
            self.installed.restore(s, self.planner.plan(s, s.legs))
        self._index_ports(s)

    # ---------------------------------------------------------------- what is installed
    @property
    def plans(self) -> dict[str, Plan]:
        """uid -> the entries installed for it."""
        return self.installed.plans

    @property
    def guards(self) -> GuardRegistry:
        return self.installed.guards

    def offloaded(self) -> list[tuple[Session, Plan]]:
        """Every session on the switch, with the entries it has there."""
        return self.installed.offloaded(self.table)

    async def read_live(self) -> LiveReading | None:
        """Every offloaded session's RTP counters and quality registers as the
        switch has them now (guard drops added to the sessions' totals); None
        when nothing is offloaded or the switch is away. Raises OffloadRefused."""
        return await self.installed.read_live(self.offloaded())

    async def live_counts(self, s: Session) -> tuple[list[int], list[int]]:
        """Packets/bytes per stream index (from party i), switch totals included."""
        return await self.installed.live_counts(s)

    # ---------------------------------------------------------------- switch events
    async def _switch_events(self) -> None:
        """The switch's notifications in order. A queue of them is worked
        through EVENTS_PER_TURN at a time, the event loop free between: an
        idle sweep reports thousands of calls at once, and taken in one go
        they held every command back for hundreds of ms."""
        n = 0
        async for ev in self.switch.events():
            n += 1
            if n % EVENTS_PER_TURN == 0:
                await asyncio.sleep(0)
            try:
                if isinstance(ev, LearnEvent):
                    await self.events.on_learn(ev)
                elif isinstance(ev, RelayIdle):
                    self.events.on_idle(ev)
                elif isinstance(ev, SwitchUp):
                    self.read_capabilities()
                    await self.refresh_routes()
                    await self.reconcile(restarted=ev.restarted)
                elif isinstance(ev, SwitchDown):
                    log.warning("switch_down", reason=ev.reason)
                    metrics.SWITCH_UP.set(0)
            except Exception:
                log.exception("switch_event_failed", event=repr(ev))

    def read_capabilities(self) -> None:
        """What the switch's program relays (a restart may bring another
        program): the sessions it decides are planned again."""
        ipv6 = self.switch.relays_ipv6
        if ipv6 == self.planner.ipv6:
            return
        self.planner.ipv6 = ipv6
        log.info("switch_capabilities", ipv6=ipv6)
        for s in self.table:
            if s.uid in self.plans or s.state is OffloadState.FALLBACK:
                self.touch(s)

    async def refresh_routes(self) -> None:
        """Route binding: read the switch's routes; when they changed, every
        session that depends on them is planned again (a moved route re-binds
        its calls' relay entries to the new port)."""
        if self.planner.port_binding is not PortBinding.ROUTE or not self.switch.connected:
            return
        try:
            routes = await self.switch.read_routes()
        except OffloadRefused as exc:
            log.warning("routes_unread", reason=exc.reason, detail=exc.detail)
            return
        if routes == self.planner.routes:
            return
        first = self.planner.routes is None
        self.planner.routes = routes
        log.info("routes_read", prefixes=len(routes.prefixes), first=first)
        for s in self.table:
            if s.uid in self.plans or s.state in (OffloadState.PENDING, OffloadState.FALLBACK):
                self.touch(s)

    def _awaiting_first_routes(self) -> int:
        """Calls held back until the switch's routes are read the first time:
        switch work still to come, so not drained."""
        if (
            self.planner.port_binding is not PortBinding.ROUTE
            or self.planner.routes is not None
            or not self.switch.connected
        ):
            return 0
        return sum(1 for s in self.table if s.state is OffloadState.PENDING)

    def _waiting_for_routes(self) -> bool:
        return not (self.planner.routes and self.planner.routes.prefixes) or any(
            s.reason == "no_ingress_route" for s in self.table
        )

    async def _routes_loop(self) -> None:
        """Every route_refresh_s; every ROUTE_WAIT_S while calls wait on RTPProxy
        for a route (a switch that restarted gets its routes back from its
        control plane after the agent reconnected): offloaded again as soon
        as their route is there."""
        while True:
            if self._waiting_for_routes():
                await asyncio.sleep(min(ROUTE_WAIT_S, self.route_refresh_s))
            else:
                self._route_wanted.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._route_wanted.wait(), self.route_refresh_s)
            try:
                await self.refresh_routes()
            except Exception:
                log.exception("routes_refresh_failed")

    @property
    def on_timeout(self) -> Callable[[Session], None] | None:
        """Called when both of a session's RTP directions went idle on the switch."""
        return self.events.on_timeout

    @on_timeout.setter
    def on_timeout(self, cb: Callable[[Session], None] | None) -> None:
        self.events.on_timeout = cb

    def at_port(self, addr: str, port: int) -> tuple[str, int, bool] | None:
        return self.ports.get((addr, port))

    def flow_owner(self, key: FlowKey) -> tuple[str, int, bool] | None:
        return self.installed.by_key.get(key)

    def plan_of(self, uid: str) -> Plan | None:
        return self.installed.plans.get(uid)

    def mark_active(self, s: Session, i: int) -> None:
        s.idle_since[i] = None

    async def reconcile(self, restarted: bool) -> None:
        """After (re)connecting: make the switch hold exactly the planned entries."""
        async with self.writer.lock, self.reaper.lock:
            metrics.SWITCH_UP.set(1)
            await self.installed.reconcile(restarted, self.table.by_uid)
        # Sessions that fell back because the switch was away get another chance.
        for s in self.table:
            if s.state is OffloadState.FALLBACK and s.reason == "switch_unreachable":
                self.touch(s)
