"""Which session owns each installed relay guard.

RTPProxy picks ports at random and may hand a just-freed one to a new call
while the ended call's removal is still pending: the new call then takes the
guard over (it is deleted before the new call's relays go in) and the old
call's removal leaves it alone. (Guard drops are counted per leg, not per
guard: installed.py reads them.)
"""

from __future__ import annotations

from collections.abc import Iterable

from p4relay_switch import GuardKey


class GuardRegistry:
    def __init__(self) -> None:
        self._owner: dict[GuardKey, str] = {}
        self._taken: set[GuardKey] = set()  # taken over: to delete at the next write

    def owner(self, g: GuardKey) -> str | None:
        return self._owner.get(g)

    def owned_by(self, uid: str, guards: Iterable[GuardKey]) -> tuple[GuardKey, ...]:
        return tuple(g for g in guards if self._owner.get(g) == uid)

    def __len__(self) -> int:
        return len(self._owner)

    def install(self, uid: str, guards: Iterable[GuardKey]) -> None:
        """These guards are on the switch for `uid`."""
        for g in guards:
            self._owner[g] = uid

    def release(self, uid: str, guards: Iterable[GuardKey]) -> None:
        """`uid` no longer holds these guards (the ones another took stay his)."""
        for g in guards:
            if self._owner.get(g) == uid:
                del self._owner[g]

    def take_over(self, g: GuardKey, uid: str) -> str | None:
        """`uid` now uses this relay port: another session's guard on it goes
        (at the next write). Returns the previous owner when taken over."""
        owner = self._owner.get(g)
        if owner is None or owner == uid:
            return None
        del self._owner[g]
        self._taken.add(g)
        return owner

    @property
    def pending_deletes(self) -> bool:
        return bool(self._taken)

    def take_deletes(self) -> tuple[GuardKey, ...]:
        """The guards taken over since the last call, to delete now."""
        out, self._taken = tuple(self._taken), set()
        return out
