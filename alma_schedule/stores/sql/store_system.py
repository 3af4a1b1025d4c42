"""System reads and maintenance of :class:`~alma_schedule.stores.sql.SqlStore`.
docs/architecture.md, section "The modules, in detail" (stores/sql/store_system.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from typing import Any

from alma_schedule.model import (
    Erroring,
    Routine,
    RunRecord,
    Scope,
    TickProbe,
    ZoneReconciliation,
    check_scope,
)
from alma_schedule.policies.ownership import owned_by
from alma_schedule.stores.arguments import age_args, reindex_args, running_of_args
from alma_schedule.stores.sql import queries as q
from alma_schedule.stores.sql import store_retention
from alma_schedule.stores.sql.queries import probe
from alma_schedule.stores.sql.queries.events import erase_events
from alma_schedule.stores.sql.rows import erroring_from_rows, routine_from_row, run_from_row
from alma_schedule.stores.sql.schema import backfills, routine_versions, routines, runs
from alma_schedule.stores.sql.store_base import RKey, SqlBase
from alma_schedule.stores.validation import check_limit, check_utc, require_utc


class SystemMixin(SqlBase):
    # ------------------------------------------------------------------ reads

    def list_inactive(self, limit: int = 1000) -> list[Routine]:
        """System: paused or disabled (not deleted) routines, in key order."""
        limit = check_limit("limit", limit)
        with self._tx(read=True) as conn:
            return [routine_from_row(r) for r in conn.execute(q.list_inactive(limit)).all()]

    def blocked(self, now: datetime, run_time_limit: timedelta, limit: int = 100) -> list[RunRecord]:
        """System: ``running``/``collecting`` for longer than ``2 * run_time_limit``, or ``submitted``
        past the deadline."""
        now, cutoff, limit = age_args("run_time_limit", now, run_time_limit, limit, times=2)
        stmt, params = probe.blocked_statement(limit), probe.tick_probe_params(now, cutoff)
        with self._tx(read=True) as conn:  # the statement built once per limit (queries/probe.py)
            # prepared on PostgreSQL: any plan reads only the open runs
            return [run_from_row(r) for r in self._driver.prepared_rows(conn, stmt, params)]

    def probe_tick(self, now: datetime, run_time_limit: timedelta) -> TickProbe:
        """System, ONE read (autocommit on PostgreSQL): per step of the tick, the ``EXISTS`` of its
        own predicate (:mod:`.queries.probe`)."""
        now, cutoff, _ = age_args("run_time_limit", now, run_time_limit, 1, times=2)
        stmt, params = probe.tick_probe_statement(), probe.tick_probe_params(now, cutoff)
        with self._tx(read=True) as conn:  # the statement built once (queries/probe.py)
            row = self._driver.one_row(conn, stmt, params)  # PostgreSQL: prepared, its generic plan reused
        return TickProbe(**{name: bool(value) for name, value in zip(q.PROBE_FLAGS, row, strict=True)})

    # --- the owner of a run ---

    def running_of(self, owner: str, limit: int = 1000) -> list[RunRecord]:
        """System, one read: the running runs of the Celery request ``owner`` (the partial index
        ``ix_runs_owner``); exact matches only (SQLite's LIKE ignores ASCII case)."""
        owner, limit = running_of_args(owner, limit)
        with self._tx(read=True) as conn:
            params = {"owner": owner, "prefix": q.like_prefix(owner), "limit": limit}
            rows = [run_from_row(r) for r in conn.execute(q.RUNNING_OF, params).all()]
        return [r for r in rows if owned_by(r.owner, owner)]

    # --- end the owner of a run ---

    def stuck(self, now: datetime, older_than: timedelta, limit: int = 100) -> list[RunRecord]:
        """System: ``running``/``submitted``/``collecting`` runs whose state was entered before
        ``now - older_than``."""
        _, cutoff, limit = age_args("older_than", now, older_than, limit)
        with self._tx(read=True) as conn:
            return [run_from_row(r) for r in conn.execute(q.stuck(cutoff, limit)).all()]

    def unstarted(self, now: datetime, older_than: timedelta, limit: int = 1) -> list[RunRecord]:
        """System: claimed runs claimed and due before ``now - older_than``, oldest first."""
        _, cutoff, limit = age_args("older_than", now, older_than, limit)
        with self._tx(read=True) as conn:
            return [run_from_row(r) for r in conn.execute(q.unstarted(cutoff, limit)).all()]

    def iter_routines(self, batch: int = 1000) -> Iterator[Routine]:
        """System: every routine in key order, one page (one short read transaction) at a time."""
        batch = check_limit("batch", batch)
        size = max(batch, 1)
        after: RKey | None = None
        while True:
            with self._tx(read=True) as conn:
                page = [routine_from_row(r) for r in conn.execute(q.iter_routines_page(after, size)).all()]
            yield from page
            if len(page) < size:
                return
            last = page[-1]
            after = (last.org, last.uid, last.routine_id)

    # ------------------------------------------------------------------ heartbeat and back-off

    def heartbeat(self, now: datetime) -> datetime | None:
        """Record the heartbeat and the wake-up hint (ONE upsert of the one row, the hint a scalar
        subquery of index probes in it; ``last_tick`` never moves backwards). Returns the hint."""
        now = require_utc("now", now)
        with self._tx(single=True) as conn:
            hint: datetime | None = conn.execute(q.record_heartbeat(self.dialect, now)).scalar()
            return hint

    def next_wake_at(self) -> datetime | None:
        with self._tx(read=True) as conn:
            value: datetime | None = conn.execute(q.select_next_wake()).scalar()
            return value

    def peek_wake(self, now: datetime) -> datetime | None:
        now = require_utc("now", now)
        with self._tx(read=True) as conn:
            value: datetime | None = conn.execute(q.select_wake_hint(now)).scalar()
            return value

    def erroring(self, limit: int = 20) -> Erroring:
        """System: routines that carry a planning error (ONE read through ``ix_routines_erroring``)."""
        limit = check_limit("limit", limit)
        with self._tx(read=True) as conn:
            rows = conn.execute(probe.erroring_statement(max(limit, 1))).all()  # one row carries the count
        return erroring_from_rows(rows, limit)

    def last_tick(self) -> datetime | None:
        with self._tx(read=True) as conn:
            value: datetime | None = conn.execute(q.select_last_tick()).scalar()
            return value

    # ------------------------------------------------------------------ maintenance

    def prune(self, before: datetime) -> int:
        """Delete TERMINAL runs finished before ``before`` and raise ``pruned_through`` (system, ONE
        transaction: the delete, then one batched UPDATE of the routines it touched). Returns the count."""
        before = require_utc("before", before)
        with self._tx() as conn:
            rows = conn.execute(self._driver.prune_statement(before)).all()
            count, fires = self._driver.pruned(rows)
            if fires:
                moves = [{"org": k[0], "uid": k[1], "routine_id": k[2], "fire": f} for k, f in fires.items()]
                conn.execute(*q.raise_pruned_through(self.dialect, moves))
            return count

    def prune_runs(self, before: datetime, limit: int) -> int:
        """The retention of run history (system, ONE transaction): :func:`.store_retention.prune_runs`."""
        return store_retention.prune_runs(self, before, limit)

    def purge_deleted(self, limit: int = 1000) -> int:
        """Remove up to ``limit`` tombstoned routines with no non-terminal run, with their runs and
        versions (ONE transaction; routines another transaction holds are left for later)."""
        limit = check_limit("limit", limit)
        with self._tx() as conn:
            keys = [tuple(r) for r in conn.execute(q.purge_candidates(limit, lock=True)).all()]
            if not keys:
                return 0
            for i in range(0, len(keys), 2000):  # SQLite binds each value: stay under its limit
                for table in (runs, routine_versions, backfills, routines):
                    conn.execute(q.delete_of(table, keys[i : i + 2000]))
            return len(keys)

    def erase_results(self, scope: Scope) -> int:
        """Erase the result text of a scope's runs and the payloads of its audit events (tenant,
        ONE transaction). Returns the count of runs."""
        check_scope(scope)
        with self._tx() as conn:
            conn.execute(erase_events(scope.org, scope.uid))
            return int(conn.execute(q.erase_results(scope.org, scope.uid)).rowcount)

    def erase_expired_results(self, now: datetime, limit: int = 1000) -> int:
        """Erase up to ``limit`` result texts whose ``erase_at <= now`` (system, one statement)."""
        limit = check_limit("limit", limit)
        now = require_utc("now", now)
        with self._tx(single=True) as conn:
            return int(conn.execute(q.erase_expired(now, limit, self.dialect)).rowcount)

    def reindex(
        self,
        derive: Callable[[Routine], datetime | None],
        *,
        tzdata_version: str | None = None,
        batch: int = 1000,
    ) -> int:
        """Re-derive ``next_due_at`` of every active routine (system), a page of ``batch`` routines
        per transaction (locked, then ONE batched UPDATE). Returns how many changed."""
        size = reindex_args(derive, tzdata_version, batch)
        changed = 0
        after: RKey | None = None
        while True:
            with self._tx() as conn:
                page = [routine_from_row(r) for r in conn.execute(q.iter_routines_page(after, size, lock=True)).all()]
                changed += self._rederive(conn, page, derive, tzdata_version)
            if len(page) < size:
                return changed
            last = page[-1]
            after = (last.org, last.uid, last.routine_id)

    def reconcile_zone_data(
        self, derive: Callable[[Routine], datetime | None], zone_data: str, *, limit: int = 1000
    ) -> ZoneReconciliation:
        """System: one page of the zone data walk (ONE transaction holding the zone_state row)."""
        size = reindex_args(derive, zone_data, limit)
        with self._tx() as conn:
            state = conn.execute(q.select_zone_state(lock=True)).first()
            previous = None if state is None else state.zone_data
            if previous == zone_data:
                return ZoneReconciliation(zone_data, previous)
            after = None if state is None or state.cursor_org is None else tuple(state[1:4])
            rows = conn.execute(q.iter_routines_page(after, size, lock=True)).all()
            page = [routine_from_row(r) for r in rows]
            changed = self._rederive(conn, page, derive, zone_data)
            done = len(page) < size
            cursor = None if done else (page[-1].org, page[-1].uid, page[-1].routine_id)
            conn.execute(q.save_zone_state(self.dialect, zone_data if done else previous, cursor))
            return ZoneReconciliation(zone_data, previous, changed, done)

    def _rederive(
        self, conn: Any, page: list[Routine], derive: Callable[[Routine], datetime | None], version: str | None
    ) -> int:
        """``next_due_at = derive(row)`` for the active rows of a locked page (ONE batched UPDATE);
        ``tzdata_version`` too when given. Returns how many next fires moved."""
        changed = 0
        updates = []
        for row in page:
            if row.inactive_reason is not None:
                continue
            due = check_utc("derived next_due_at", derive(row), optional=True)
            if due != row.next_due_at:
                changed += 1
            if due != row.next_due_at or (version and version != row.tzdata_version):
                updates.append({"org": row.org, "uid": row.uid, "routine_id": row.routine_id, "next_due_at": due})
        if updates:
            conn.execute(*q.reindex_batch(self.dialect, updates, version))
        return changed
