"""What a session needs on the switch, decided from the session alone.

Pure functions of a session's state (no I/O, no switch): whether it can be
offloaded now and why not (`Planner.desired`), and which entries carry it
(`Planner.plan`: the session as the switch client's `RelayCall`, whose
entries are the ones the PTF suite checks). The offloader writes what this
decides.
"""

from __future__ import annotations

import enum
import functools
import ipaddress
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TypeAlias

from p4relay_switch import (
    CallEntries,
    Counters,
    EntryBatch,
    EntryDump,
    RelayCall,
    RelayDirection,
    Routes,
)
from p4relay_switch import Endpoint as SwitchEndpoint
from p4relay_switch.names import UNBOUND_PORT

from .state import Endpoint, OffloadState, Session

DEFAULT_NAT_NETS = (
    "10.0.0.0/8",
    "172.16.0.0/12",
    "192.168.0.0/16",
    "100.64.0.0/10",
    "169.254.0.0/16",
)


class PortBinding(enum.StrEnum):
    """Which switch port a party's relay entries are bound to (the switch
    relays a flow only when it arrives on that port; the party's address and
    ports sent from any other port are a spoofed source and never relayed).

    * ``route`` (default): the port the switch routes the party's source
      address to (reverse path, like strict uRPF), read from the switch's own
      `ipv4_lpm` and `nexthop` tables. A spoofed packet cannot change it; a
      learn digest from any other port is refused. Needs symmetric routing.
    * ``learned``: the port the learn digest that latched the source arrived
      on, for networks whose media may arrive on another port than the route
      back (asymmetric routing, several uplinks). A party whose signalled
      address is trusted then waits for its first packet too, and a stranger
      who spoofs that address first can still take the stream: the learning
      policy is the only check.
    * ``off``: no binding. The agent turns binding off on every switch port
      and installs each leg with UNBOUND_PORT, so the party's media is relayed
      whichever port it arrives on (asymmetric routing, ECMP, a move between
      uplinks). A packet spoofing a party's address and ports from any port is
      then relayed as the party's: only the learning policy and the relay
      guard (strangers with other addresses or ports) still hold.
    """

    ROUTE = "route"
    LEARNED = "learned"
    OFF = "off"


# The entries that carry one offloaded session (the switch client's mapping).
Plan: TypeAlias = CallEntries

# Why an address family keeps a session on RTPProxy (`Planner.family_reason`).
IPV6_UNSUPPORTED = "ipv6"  # the switch's program relays IPv4 only
FAMILY_BRIDGE = "family_bridge"  # one party on IPv4, the other on IPv6 (RTPProxy bridges)
FAMILY_MISMATCH = "family_mismatch"  # a party and the relay address it sends to differ
IPV6_LINK_LOCAL = "ipv6_link_local"  # fe80::/10 or a zone (`%eth0`): never forwarded
IPV4_MAPPED = "ipv4_mapped"  # ::ffff:a.b.c.d: IPv4 on the wire, no IPv6 entry matches
FAMILY_REASONS = (IPV6_UNSUPPORTED, FAMILY_BRIDGE, FAMILY_MISMATCH, IPV6_LINK_LOCAL, IPV4_MAPPED)


@functools.lru_cache(maxsize=65536)
def _switch_endpoint(addr: str, port: int) -> SwitchEndpoint:
    # Parsed once: a session's endpoints are planned again at every change of
    # it, and parsing an address costs microseconds.
    return SwitchEndpoint(ipaddress.ip_address(addr), port)


@functools.lru_cache(maxsize=65536)
def address_family(addr: str) -> tuple[int, str | None]:
    """(4 or 6, why the switch cannot carry media to/from it or None); cached:
    the same parties come back in every plan."""
    ip = ipaddress.ip_address(addr)
    if ip.version == 4:
        return 4, None
    assert isinstance(ip, ipaddress.IPv6Address)
    if ip.scope_id is not None or ip.is_link_local:
        return 6, IPV6_LINK_LOCAL
    if ip.ipv4_mapped is not None:
        return 6, IPV4_MAPPED
    return 6, None


def source(s: Session, i: int) -> Endpoint:
    st = s.streams[i]
    ep = st.learned or st.sdp
    assert ep is not None
    return ep


def destination(s: Session, i: int) -> Endpoint:
    st = s.streams[i]
    ep = st.sdp if st.asymmetric else (st.learned or st.sdp)
    assert ep is not None
    return ep


class Planner:
    """The offload policy: which sessions go to the switch, with which entries."""

    def __init__(
        self,
        *,
        nat_nets: Iterable[str] = DEFAULT_NAT_NETS,
        latch_always: bool = False,
        enabled: bool = True,
        guard: bool = True,
        port_binding: PortBinding | str = PortBinding.ROUTE,
    ) -> None:
        self.nat_nets = [ipaddress.ip_network(n) for n in nat_nets]
        self._trust_cache: dict[str, bool] = {}
        self.latch_always = latch_always
        self.enabled = enabled
        self.guard = guard
        self.port_binding = PortBinding(port_binding)
        self.routes: Routes | None = None  # the switch's, once read
        # Maintenance (rtpagent/maintenance.py sets them): draining keeps new
        # calls on RTPProxy, evacuating every call; the cap bounds the calls
        # on the switch (`occupied`: those there and those being added).
        self.draining = False
        self.evacuating = False
        self.capacity: Callable[[], int] | None = None
        self.occupied: Callable[[], int] = lambda: 0
        # What the switch's program relays (rtpagent/bfrt.py reads it from the
        # program at connect): IPv6 calls, and calls bridged between families.
        self.ipv6 = False
        self.bridging = False

    def route_port(self, addr: str) -> int | None:
        """The port the switch routes `addr` to (None: no route, or routes not read yet)."""
        return None if self.routes is None else self.routes.port_for(addr)

    def accepts_port(self, s: Session, i: int, addr: str, port: int) -> bool:
        """May media from `addr` arriving on `port` be stream i's source?"""
        if self.port_binding is PortBinding.ROUTE:
            return self.route_port(addr) == port
        if self.port_binding is PortBinding.OFF:
            return True
        bound = s.streams[i].ingress_port
        return bound is None or bound == port

    def bind(self, s: Session) -> None:
        """Route binding: each stream's port from its current source's route
        (kept as it is while the routes are unknown: a restart restores it).
        No binding: every stream's entries carry UNBOUND_PORT."""
        if self.port_binding is PortBinding.OFF:
            for st in s.streams:
                st.ingress_port = UNBOUND_PORT
            return
        if self.port_binding is not PortBinding.ROUTE or self.routes is None:
            return
        for i, st in enumerate(s.streams):
            ep = st.learned or st.sdp
            st.ingress_port = None if ep is None else self.route_port(source(s, i).addr)

    def trusted(self, ep: Endpoint) -> bool:
        """Is signalling's address for a party its real media source (not
        inside the NAT nets, and not every address latched)?"""
        if self.latch_always:
            return False
        trusted = self._trust_cache.get(ep.addr)
        if trusted is None:
            ip = ipaddress.ip_address(ep.addr)
            trusted = not any(ip in n for n in self.nat_nets)
            if len(self._trust_cache) > 65536:
                self._trust_cache.clear()
            self._trust_cache[ep.addr] = trusted
        return trusted

    def desired(self, s: Session, switch_connected: bool) -> tuple[OffloadState, str | None]:
        """What state the session should be in, and why."""
        if not self.enabled:
            return OffloadState.FALLBACK, "offload_disabled"
        st0, st1 = s.streams
        if not (st0.port and st1.port and st0.laddr and st1.laddr):
            return OffloadState.PENDING, None
        if st0.on_hold or st1.on_hold:
            return OffloadState.HELD, "on_hold"
        if st0.sdp is None or st1.sdp is None:
            return OffloadState.PENDING, None
        held = s.held_back_reason()
        if held is not None:
            return OffloadState.HELD, held
        family = self.family_reason(s)
        if family is not None:
            return OffloadState.FALLBACK, family
        if self.evacuating:
            return OffloadState.FALLBACK, "evacuated"
        if s.state is not OffloadState.OFFLOADED:
            if self.draining:
                return OffloadState.FALLBACK, "draining"
            if self.capacity is not None and self.occupied() >= self.capacity():
                return OffloadState.FALLBACK, "capacity"
        if not switch_connected:
            return OffloadState.FALLBACK, "switch_unreachable"
        for st in s.streams:
            if st.learned is None and st.sdp is not None and not self.trusted(st.sdp):
                return OffloadState.LEARNING, None
        self.bind(s)
        for st in s.streams:
            if st.ingress_port is None:
                if self.port_binding is PortBinding.LEARNED:
                    return OffloadState.LEARNING, None  # the party's first packet names it
                if self.routes is None:
                    return OffloadState.PENDING, None  # the switch's routes not read yet
                return OffloadState.FALLBACK, "no_ingress_route"
        return OffloadState.OFFLOADED, None

    def family_reason(self, s: Session) -> str | None:
        """Why the sessions' address families keep it on RTPProxy, or None.
        Stream i's party sends from its address to the relay address of its
        stream, so both must be of one family; the two streams' families
        differ on a bridged call (RTPProxy's `-l addr4/addr6` with `e`/`i`)."""
        families = []
        for st in s.streams:
            assert st.laddr is not None and st.sdp is not None
            fam, why = address_family(st.laddr)
            for ep in (st.sdp, st.learned):
                if ep is None:
                    continue
                party, bad = address_family(ep.addr)
                why = why or bad
                if party != fam:
                    return FAMILY_MISMATCH
            if why is not None:
                return why
            families.append(fam)
        if families[0] != families[1] and not self.bridging:
            return FAMILY_BRIDGE
        if 6 in families and not self.ipv6:
            return IPV6_UNSUPPORTED
        return None

    def call(self, s: Session, legs: list[int]) -> RelayCall:
        """The session as a call on the switch, on these legs (leg i carries
        party i's media): party i sends to its relay port and is bound to its
        ingress port; the other side's relay port sends on to the other
        party's destination."""
        self.bind(s)
        ep = _switch_endpoint
        directions = []
        for i in (0, 1):
            me, other = s.streams[i], s.streams[1 - i]
            assert me.port and me.laddr and other.port and other.laddr
            assert me.ingress_port is not None
            src, dst = source(s, i), destination(s, 1 - i)
            rtcp = me.learned_rtcp
            directions.append(
                RelayDirection(
                    leg=legs[i],
                    src=ep(src.addr, src.port),
                    relay=ep(me.laddr, me.port),
                    out_src=ep(other.laddr, other.port),
                    out_dst=ep(dst.addr, dst.port),
                    ingress_port=me.ingress_port,
                    rtcp_src=None if rtcp is None else ep(rtcp.addr, rtcp.port),
                )
            )
        return RelayCall(directions[0], directions[1])

    def plan(self, s: Session, legs: list[int]) -> Plan:
        """The entries that carry the session; guarded, its relay-side ports
        drop packets from anyone but the installed sources (counted on the
        leg of the side the port faces), so they never reach RTPProxy."""
        return self.call(s, legs).entries(guard=self.guard)


def add_counts(s: Session, p: Plan, counts: dict[int, Counters]) -> None:
    """The legs' counters (RTP and RTCP of each direction) into the session's
    totals, by stream index (leg i carries party i's packets)."""
    for i, lg in enumerate(p.legs):
        c = counts.get(lg.leg)
        if c is not None:
            s.switch_totals.packets[i] += c.packets
            s.switch_totals.bytes[i] += c.bytes


@dataclass(frozen=True, slots=True)
class Reconciliation:
    stale: EntryBatch  # on the switch, planned for no session: delete
    missing: EntryBatch  # planned, absent or different on the switch: (re)write


def reconciliation(plans: Iterable[Plan], have: EntryDump) -> Reconciliation:
    """What makes the switch's call tables hold exactly the planned entries."""
    plans = list(plans)
    want_keys = {r.key: r for p in plans for r in p.relays}
    want_legs = {lg.leg: lg for p in plans for lg in p.legs}
    want_guards = {g for p in plans for g in p.guards}
    have_keys = {r.key: r for r in have.relays}
    have_legs = {lg.leg: lg for lg in have.legs}
    have_guards = set(have.guards)
    missing_legs = [lg for leg, lg in want_legs.items() if have_legs.get(leg) != lg]
    missing = tuple(r for k, r in want_keys.items() if have_keys.get(k) != r)
    return Reconciliation(
        stale=EntryBatch(
            # A guard whose leg differs is deleted and added again (deletions first).
            del_guards=tuple(g.key for g in have_guards if g not in want_guards),
            del_relays=tuple(k for k in have_keys if k not in want_keys),
            del_legs=tuple(leg for leg in have_legs if leg not in want_legs),
        ),
        missing=EntryBatch(
            add_legs=tuple(lg for lg in missing_legs if lg.leg not in have_legs),
            mod_legs=tuple(lg for lg in missing_legs if lg.leg in have_legs),
            add_relays=missing,
            del_relays=tuple(r.key for r in missing if r.key in have_keys),
            add_guards=tuple(g for g in want_guards if g not in have_guards),
        ),
    )
