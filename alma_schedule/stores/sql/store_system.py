"""System reads and maintenance of :class:`~alma_schedule.stores.sql.SqlStore`.

Everything here streams or is bounded: lists take a ``limit``; :meth:`iter_routines` and
:meth:`reindex` walk the routines by key in pages (keyset pagination, one short transaction per
page), so memory stays flat at any number of routines.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime, timedelta

from alma_schedule.model import Routine, RunRecord, Scope, check_scope
from alma_schedule.policies.ownership import owned_by
from alma_schedule.stores.arguments import running_of_args
from alma_schedule.stores.sql import queries as q
from alma_schedule.stores.sql.rows import routine_from_row, run_from_row
from alma_schedule.stores.sql.schema import routine_versions, routines, runs
from alma_schedule.stores.sql.store_base import RKey, SqlBase
from alma_schedule.stores.validation import check_text, check_utc, require_utc


class SystemMixin(SqlBase):
    # ------------------------------------------------------------------ reads

    def list_inactive(self, limit: int = 1000) -> list[Routine]:
        """System: paused or disabled (not deleted) routines, in key order."""
        with self._tx(read=True) as conn:
            return [routine_from_row(r) for r in conn.execute(q.list_inactive(max(limit, 0))).all()]

    def blocked(self, now: datetime, run_time_limit: timedelta, limit: int = 100) -> list[RunRecord]:
        """System: ``running``/``collecting`` for longer than ``2 * run_time_limit``, or ``submitted``
        past the deadline."""
        now = require_utc("now", now)
        with self._tx(read=True) as conn:
            rows = conn.execute(q.blocked(now, now - 2 * run_time_limit, max(limit, 0))).all()
            return [run_from_row(r) for r in rows]

    # --- the owner of a run (issue 14) ---

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
        now = require_utc("now", now)
        with self._tx(read=True) as conn:
            return [run_from_row(r) for r in conn.execute(q.stuck(now - older_than, max(limit, 0))).all()]

    def iter_routines(self, batch: int = 1000) -> Iterator[Routine]:
        """System: every routine in key order, one page (one short read transaction) at a time."""
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

    def heartbeat(self, now: datetime) -> None:
        """Record the heartbeat (ONE upsert of the one row; it never moves backwards)."""
        now = require_utc("now", now)
        with self._tx(single=True) as conn:
            conn.execute(q.record_heartbeat(self.dialect, now))

    def last_tick(self) -> datetime | None:
        with self._tx(read=True) as conn:
            value: datetime | None = conn.execute(q.select_last_tick()).scalar()
            return value

    # ------------------------------------------------------------------ maintenance

    def prune(self, before: datetime) -> int:
        """Delete TERMINAL runs finished before ``before`` (system, one statement). Returns the count."""
        before = require_utc("before", before)
        with self._tx(single=True) as conn:
            return int(conn.execute(q.prune(before)).rowcount)

    def purge_deleted(self, limit: int = 1000) -> int:
        """Remove up to ``limit`` tombstoned routines with no non-terminal run, with their runs and
        versions (ONE transaction; routines another transaction holds are left for later)."""
        with self._tx() as conn:
            keys = [tuple(r) for r in conn.execute(q.purge_candidates(max(limit, 0), lock=True)).all()]
            if not keys:
                return 0
            for i in range(0, len(keys), 2000):  # SQLite binds each value: stay under its limit
                for table in (runs, routine_versions, routines):
                    conn.execute(q.delete_of(table, keys[i : i + 2000]))  # type: ignore[arg-type]
            return len(keys)

    def erase_results(self, scope: Scope) -> int:
        """Erase the result text of a scope's runs (tenant, one statement). Returns the count."""
        check_scope(scope)
        with self._tx(single=True) as conn:
            return int(conn.execute(q.erase_results(scope.org, scope.uid)).rowcount)

    def erase_expired_results(self, now: datetime, limit: int = 1000) -> int:
        """Erase up to ``limit`` result texts whose ``erase_at <= now`` (system, one statement)."""
        now = require_utc("now", now)
        with self._tx(single=True) as conn:
            return int(conn.execute(q.erase_expired(now, max(limit, 0))).rowcount)

    def reindex(
        self,
        derive: Callable[[Routine], datetime | None],
        *,
        tzdata_version: str | None = None,
        batch: int = 1000,
    ) -> int:
        """Re-derive ``next_due_at`` of every active routine (system), a page of ``batch`` routines
        per transaction (locked, then ONE batched UPDATE). Returns how many changed."""
        check_text("tzdata_version", tzdata_version)
        size = max(batch, 1)
        changed = 0
        after: RKey | None = None
        while True:
            with self._tx() as conn:
                page = [routine_from_row(r) for r in conn.execute(q.iter_routines_page(after, size, lock=True)).all()]
                updates = []
                for row in page:
                    if row.inactive_reason is not None:
                        continue
                    due = check_utc("derived next_due_at", derive(row), optional=True)
                    if due != row.next_due_at:
                        changed += 1
                    if due != row.next_due_at or (tzdata_version and tzdata_version != row.tzdata_version):
                        updates.append(
                            {"org": row.org, "uid": row.uid, "routine_id": row.routine_id, "next_due_at": due}
                        )
                if updates:
                    conn.execute(*q.reindex_batch(self.dialect, updates, tzdata_version))
            if len(page) < size:
                return changed
            last = page[-1]
            after = (last.org, last.uid, last.routine_id)
