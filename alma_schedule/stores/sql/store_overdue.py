"""The "did not run" alarm of :class:`~alma_schedule.stores.sql.SqlStore`
(:class:`~alma_schedule.stores.overdue.OverdueStore`): a page of routines with ``expect`` (the partial
index), their latest runs in ONE ``UNION ALL`` statement, the policy in Python; the alert rows by
primary key, each write one compare-and-set statement.

docs/architecture.md, section "The modules, in detail" (stores/sql/store_overdue.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from alma_schedule.model import RunRecord
from alma_schedule.model.overdue import AlertState, FireKey, OverdueFire
from alma_schedule.policies.overdue import RECENT_RUNS, overdue_fire
from alma_schedule.stores.overdue import fire_key_args, fires_args, overdue_args
from alma_schedule.stores.sql.queries import overdue as oq
from alma_schedule.stores.sql.rows import routine_from_row, run_from_row
from alma_schedule.stores.sql.store_base import SqlBase
from alma_schedule.stores.validation import require_utc

#: Routines with ``expect`` read per page (each page: two statements).
PAGE = 200


def _state(row: Sequence[Any]) -> AlertState:
    """An alert row (every ``overdue_alerts`` column, in order: the key, attempts, lease, delivery)."""
    org, uid, routine_id, fire_at, attempts, next_attempt_at, delivered_at = tuple(row)[:7]
    return AlertState(org, uid, routine_id, fire_at, attempts, next_attempt_at, delivered_at)


class OverdueMixin(SqlBase):
    def overdue(self, now: datetime, limit: int = 100) -> list[OverdueFire]:
        now, limit = overdue_args(now, limit)
        out: list[OverdueFire] = []
        after: tuple[str, str, str] | None = None
        with self._tx(read=True) as conn:
            while len(out) < limit:
                page = [routine_from_row(r) for r in conn.execute(oq.expect_routines(self.dialect, after, PAGE)).all()]
                live = [r for r in page if r.enabled and r.paused_reason is None]
                recent: dict[tuple[str, str, str], list[RunRecord]] = {}
                if live:
                    keys = [(r.org, r.uid, r.routine_id) for r in live]
                    for row in conn.execute(oq.recent_runs(keys, RECENT_RUNS)).all():
                        rec = run_from_row(row)
                        recent.setdefault((rec.org, rec.uid, rec.routine_id), []).append(rec)
                for routine in live:
                    fire = overdue_fire(routine, recent.get((routine.org, routine.uid, routine.routine_id), []), now)
                    if fire is not None and len(out) < limit:
                        out.append(fire)
                if len(page) < PAGE:
                    break
                last = page[-1]
                after = (last.org, last.uid, last.routine_id)
            if out:
                rows = conn.execute(oq.alert_rows([f.fire_key for f in out])).all()
                states = {(s.org, s.uid, s.routine_id, s.fire_at): s for s in map(_state, rows)}
                out = [
                    dataclasses.replace(f, delivered_at=states[f.fire_key].delivered_at) if f.fire_key in states else f
                    for f in out
                ]
        return out

    def take_alerts(self, fires: Sequence[OverdueFire], *, now: datetime, lease_until: datetime) -> list[OverdueFire]:
        now, lease_until = require_utc("now", now), require_utc("lease_until", lease_until)
        checked = fires_args(fires)
        taken: list[OverdueFire] = []
        if not checked:
            return taken
        with self._tx(single=True) as conn:  # independent compare-and-set statements, each atomic
            for fire, key in checked:
                won = conn.execute(oq.insert_alert(self.dialect, key, now, lease_until)).first() is not None
                if not won:
                    won = conn.execute(oq.take_alert(key, now, lease_until)).first() is not None
                if won:
                    taken.append(fire)
        return taken

    def alert_state(self, key: FireKey) -> AlertState | None:
        key = fire_key_args(key)
        with self._tx(read=True) as conn:
            row = conn.execute(oq.alert_rows([key])).first()
        return None if row is None else _state(row)

    def alert_retry(self, key: FireKey, *, lease_until: datetime) -> bool:
        key, lease_until = fire_key_args(key), require_utc("lease_until", lease_until)
        with self._tx(single=True) as conn:
            return conn.execute(oq.alert_retry(key, lease_until)).first() is not None

    def alert_delivered(self, key: FireKey, *, now: datetime) -> bool:
        key, now = fire_key_args(key), require_utc("now", now)
        with self._tx(single=True) as conn:
            return conn.execute(oq.alert_delivered(key, now)).first() is not None
