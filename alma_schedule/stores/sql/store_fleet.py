"""The fleet reads of :class:`~alma_schedule.stores.sql.SqlStore`
(:class:`~alma_schedule.stores.fleet.FleetStore`): the scopes one primary-key step each, the
routines one primary-key range (:mod:`alma_schedule.stores.sql.queries.fleet`).

docs/architecture.md, section "The modules, in detail" (stores/sql/store_fleet.py).
"""

from __future__ import annotations

from alma_schedule.errors import InvalidInput
from alma_schedule.model import Routine
from alma_schedule.stores.fleet import RoutineKeyT, ScopeKey, fleet_args
from alma_schedule.stores.sql.queries import fleet as qf
from alma_schedule.stores.sql.rows import routine_from_row
from alma_schedule.stores.sql.store_base import SqlBase

__all__ = ["FleetMixin"]


class FleetMixin(SqlBase):
    def fleet_scopes(self, *, after: ScopeKey | None = None, limit: int = 50, org: str | None = None) -> list[ScopeKey]:
        edge, limit, org = fleet_args(after, 2, limit, org)
        out: list[ScopeKey] = []
        with self._tx(read=True) as conn:
            while len(out) < limit:
                row = conn.execute(qf.next_scope(edge, org)).first()
                if row is None:
                    break
                found = (str(row[0]), str(row[1]))
                out.append(found)
                edge = found
        return out

    def fleet_routines(
        self, *, after: RoutineKeyT | None = None, limit: int = 50, org: str | None = None, uid: str | None = None
    ) -> list[Routine]:
        edge, limit, org = fleet_args(after, 3, limit, org)
        if uid is not None and org is None:
            raise InvalidInput("uid needs org")
        with self._tx(read=True) as conn:
            rows = conn.execute(qf.fleet_routines(edge, limit, org, uid)).all()
        return [routine_from_row(r) for r in rows]
