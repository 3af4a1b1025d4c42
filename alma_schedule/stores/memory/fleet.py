"""The fleet reads of the in-memory store (:class:`~alma_schedule.stores.fleet.FleetStore`): the
routines' keys sorted, sliced after the given key.

docs/architecture.md, section "The modules, in detail" (stores/memory/fleet.py).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from alma_schedule.errors import InvalidInput
from alma_schedule.model import Routine
from alma_schedule.stores.fleet import RoutineKeyT, ScopeKey, fleet_args

RKey = tuple[str, str, str]


class FleetMixin:
    _lock: threading.RLock
    _routines: dict[RKey, Any]

    if TYPE_CHECKING:

        def _out(self, key: RKey) -> Routine: ...  # the store's own (schedule and definition attached)

    def fleet_scopes(self, *, after: ScopeKey | None = None, limit: int = 50, org: str | None = None) -> list[ScopeKey]:
        edge, limit, org = fleet_args(after, 2, limit, org)
        with self._lock:
            scopes = sorted({(k[0], k[1]) for k in self._routines if org is None or k[0] == org})
        return [s for s in scopes if edge is None or s > edge][:limit]

    def fleet_routines(
        self, *, after: RoutineKeyT | None = None, limit: int = 50, org: str | None = None, uid: str | None = None
    ) -> list[Routine]:
        edge, limit, org = fleet_args(after, 3, limit, org)
        if uid is not None and org is None:
            raise InvalidInput("uid needs org")
        with self._lock:
            keys = sorted(
                k
                for k in self._routines
                if (org is None or k[0] == org) and (uid is None or k[1] == uid) and (edge is None or k > edge)
            )
            return [self._out(k) for k in keys[:limit]]
