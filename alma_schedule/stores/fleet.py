"""The store's fleet reads (:class:`FleetStore`, one of the protocols
:class:`~alma_schedule.stores.base.Store` joins): the scopes that hold routines and the routines of
the whole fleet (or of one org) in key order, each read bounded by its ``limit`` and served by the
primary key of ``routines`` (no other index). The dashboard's Scopes, Routines and Ledger pages page
through them (:mod:`alma_schedule.dashboard.fleet`).

docs/architecture.md, section "The modules, in detail" (stores/fleet.py).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from alma_schedule.errors import InvalidInput
from alma_schedule.model import Routine
from alma_schedule.stores.validation import check_limit, check_text

__all__ = ["FleetStore", "ScopeKey", "fleet_args"]

ScopeKey = tuple[str, str]
RoutineKeyT = tuple[str, str, str]


def _key(name: str, value: object, size: int) -> tuple[str, ...] | None:
    if value is None:
        return None
    if not isinstance(value, tuple) or len(value) != size:
        raise InvalidInput(f"{name} must be a tuple of {size} ids")
    return tuple(check_text(name, v, optional=False) or "" for v in value)


def fleet_args(after: object, size: int, limit: object, org: object) -> tuple[tuple[str, ...] | None, int, str | None]:
    """``(after, limit, org)`` checked: ``after`` a key of ``size`` texts or None, ``org`` text or None."""
    return _key("after", after, size), check_limit("limit", limit), check_text("org", org)


@runtime_checkable
class FleetStore(Protocol):
    def fleet_scopes(self, *, after: ScopeKey | None = None, limit: int = 50, org: str | None = None) -> list[ScopeKey]:
        """System, ONE read transaction, bounded: the next ``limit`` distinct scopes ``(org, uid)``
        holding a routine (deleted ones too), in code point order after ``after``, only ``org``'s
        when given. Each scope is found by ONE ordered read of the primary key (a loose index scan:
        one index entry per scope, never the scope's rows)."""
        ...

    def fleet_routines(
        self, *, after: RoutineKeyT | None = None, limit: int = 50, org: str | None = None, uid: str | None = None
    ) -> list[Routine]:
        """System, ONE statement, bounded by ``limit``: routines (deleted ones too) in key order
        ``(org, uid, routine_id)`` after ``after``, only ``org``'s (and ``uid``'s, which needs ``org``)
        when given: a range of the primary key. Filters by kind or state are the caller's, on
        the rows read (:mod:`alma_schedule.dashboard.fleet`: at most 20 pages of them)."""
        ...
