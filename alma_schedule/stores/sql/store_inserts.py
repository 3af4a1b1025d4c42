"""The run rows of a claim, inserted (:class:`InsertsMixin`, under :mod:`.store_tick`): the INSERT
with its fallbacks' checks, SQLite's chunking under its bind limit, the driver's plain rows; and
``claim_manual`` (one manual run, inserted under its routine's row lock).

``HeldCheck``: a short batch's check for due rows other transactions held (PostgreSQL), carried by
its first INSERT's ``RETURNING`` when that INSERT returns a row (:func:`.queries.inserts.insert_records`),
else asked with its own statement by ``claim_due``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from alma_schedule.errors import StoreConflict
from alma_schedule.model import ClaimResult, RunKey, RunRecord, RunState
from alma_schedule.stores.arguments import claim_manual_args
from alma_schedule.stores.base import Staging
from alma_schedule.stores.sql import queries as q
from alma_schedule.stores.sql.rows import new_run, routine_from_row, run_from_row
from alma_schedule.stores.sql.store_base import RKey
from alma_schedule.stores.sql.store_buffered import BufferedMixin

SQLITE_CHUNK = 2000


@dataclass
class HeldCheck:
    """Whether a routine other than ``besides`` is due at ``now`` (:func:`.queries.claim.due_exists`):
    ``found`` stays None until a statement answered."""

    now: datetime
    besides: list[RKey]
    found: bool | None = None


class InsertsMixin(BufferedMixin):
    def _insert(
        self,
        conn: Any,
        records: list[RunRecord],
        by_key: dict[Any, RunRecord],
        held: HeldCheck | None = None,
        staging: Staging | None = None,
        counting: tuple[datetime, list[dict[str, Any]]] | None = None,
        built_ahead: tuple[q.Columns, dict[str, Any]] | None = None,
        meanwhile: Callable[[], None] | None = None,
    ) -> dict[Any, RunRecord]:
        """Insert these records (``ON CONFLICT DO NOTHING``): the ones inserted, by run key; with
        ``held`` (PostgreSQL) its check rides in the INSERT, answered when a row came back; with
        ``staging``, it is called with the ``claimed`` records (in order) while the first INSERT
        runs (PostgreSQL: sent ahead, :meth:`_meanwhile`; SQLite: after it), and so is
        ``meanwhile`` (after ``staging``); ``counting`` (PostgreSQL): ``(now, rows)`` of
        ``max_runs``' count, which rides in the first INSERT (:func:`.queries.insert_records`);
        ``built_ahead`` (PostgreSQL): :func:`.queries.record_columns` of ``records`` and some of them
        rendered (:func:`.hot.array_literal`, by column name), built ahead."""
        done: dict[Any, RunRecord] = {}
        check = (held.now, held.besides) if held is not None else None
        claimed = [r for r in records if r.state == RunState.CLAIMED] if staging is not None else []
        ahead = built_ahead if self.dialect == "postgresql" else None
        for chunk in self._chunks(records):
            now, counted = counting if counting is not None else (None, [])
            built, rendered = ahead if ahead is not None else (None, None)
            stmt, counting = q.insert_records(self.dialect, chunk, check, counted, now, built, rendered), None
            ahead = None
            if (staging is None or not claimed) and meanwhile is None:
                rows = self._rows(conn, *stmt)
            else:
                with self._meanwhile(conn, stmt) as (answer,):
                    if staging is not None and claimed:
                        staging(claimed)
                    if meanwhile is not None:
                        meanwhile()
                rows, staging, meanwhile = answer(), None, None
            if held is not None:
                if rows:
                    held.found = bool(rows[0][4])
                rows = [row[:4] for row in rows]
            done.update((tuple(key), by_key[tuple(key)]) for key in rows)
        if meanwhile is not None:  # no row to insert
            meanwhile()
        return done

    def _check_duplicates(self, conn: Any, keys: list[tuple[str, str, str, str]]) -> None:
        """Fires that got no row must be duplicates (their run key exists): anything else cannot
        happen while every insert of a run locks its routine first; if it did, roll back, loudly.
        A statement only when some fire got no row."""
        existing: set[tuple[Any, ...]] = set()
        for chunk in self._chunks(keys):
            stmt, params = q.existing_runs(self.dialect, chunk)
            existing.update(tuple(row) for row in conn.execute(stmt, params).all())
        for key in keys:
            if key not in existing:
                raise StoreConflict(f"fire {'/'.join(key)} could not be recorded; nothing was claimed")

    def _chunks(self, items: list[Any]) -> list[list[Any]]:
        """PostgreSQL binds arrays (one statement whatever the size); SQLite binds each value, under
        its 32,766-variable limit: row-value lists go in chunks of 2,000 rows."""
        if self.dialect == "postgresql" or len(items) <= SQLITE_CHUNK:
            return [items] if items else []
        return [items[i : i + SQLITE_CHUNK] for i in range(0, len(items), SQLITE_CHUNK)]

    def claim_manual(
        self,
        key: RunKey,
        *,
        now: datetime,
        expires_at: datetime,
        resend_at: datetime,
    ) -> ClaimResult:
        """Tenant, ONE transaction: lock the routine row, then insert a ``claimed`` manual run."""
        args = claim_manual_args(key, now, expires_at, resend_at)
        rk, run_id, now, expires, resend = args.key, args.run_id, args.now, args.expires_at, args.resend_at
        with self._tx() as conn:
            found = conn.execute(q.select_routine(*rk, lock=True)).first()
            if found is None:
                return ClaimResult(False, None, "not_found")
            routine = routine_from_row(found)
            if routine.inactive_reason is not None:
                return ClaimResult(False, None, routine.inactive_reason)
            blocking = conn.execute(q.select_open_run(*rk)).first()
            if blocking is not None:
                return ClaimResult(False, run_from_row(blocking), "overlap")
            values = new_run(
                rk,
                run_id,
                state=RunState.CLAIMED,
                origin="manual",
                config_revision=routine.config_revision,
                fire_at=now,
                now=now,
                expires_at=expires,
                resend_at=resend,
            )
            row = conn.execute(q.insert_run(self.dialect, values)).first()
            if row is not None:
                return ClaimResult(True, run_from_row(row), "won")
            existing = conn.execute(q.SELECT_RUN, q.run_params(key)).first()
            return ClaimResult(False, run_from_row(existing) if existing is not None else None, "duplicate")
