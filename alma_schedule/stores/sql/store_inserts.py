"""The run rows of a claim, inserted (:func:`insert_fires`, :func:`check_duplicates`), and
``claim_manual`` (:class:`ManualMixin`: one manual run, inserted under its routine's row lock).
docs/architecture.md, section "The modules, in detail" (stores/sql/store_inserts.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from alma_schedule.errors import StoreConflict
from alma_schedule.model import ClaimResult, RunKey, RunRecord, RunState
from alma_schedule.policies import audit
from alma_schedule.stores.arguments import claim_manual_args
from alma_schedule.stores.fast import Staging
from alma_schedule.stores.sql import queries as q
from alma_schedule.stores.sql.driver import Portable
from alma_schedule.stores.sql.rows import new_run, routine_from_row, run_from_row
from alma_schedule.stores.sql.store_base import RKey, SqlBase
from alma_schedule.stores.sql.store_events import append


@dataclass
class HeldCheck:
    """Whether a routine other than ``besides`` is due at ``now`` (:func:`.queries.claim.due_exists`):
    ``found`` stays None until a statement answered."""

    now: datetime
    besides: list[RKey]
    found: bool | None = None


def insert_fires(
    driver: Portable,
    dialect: str,
    conn: Any,
    records: list[RunRecord],
    by_key: dict[Any, RunRecord],
    held: HeldCheck | None = None,
    staging: Staging | None = None,
    counting: tuple[datetime, list[dict[str, Any]]] | None = None,
    built_ahead: tuple[q.Columns, dict[str, Any]] | None = None,
    meanwhile: Callable[[], None] | None = None,
) -> dict[Any, RunRecord]:
    """Insert these records (``ON CONFLICT DO NOTHING``); returns the ones inserted, by run key.
    ``held``, ``counting`` and ``built_ahead`` (PostgreSQL) ride in the first INSERT; ``staging`` and
    ``meanwhile`` are called while it runs (SQLite: after it).
    docs/architecture.md, section "The modules, in detail" (stores/sql/store_inserts.py).
    """
    done: dict[Any, RunRecord] = {}
    check = (held.now, held.besides) if held is not None else None
    claimed = [r for r in records if r.state == RunState.CLAIMED] if staging is not None else []
    ahead = built_ahead
    for chunk in driver.chunks(records):
        now, counted = counting if counting is not None else (None, [])
        built, rendered = ahead if ahead is not None else (None, None)
        stmt, counting = q.insert_records(dialect, chunk, check, counted, now, built, rendered), None
        ahead = None
        if (staging is None or not claimed) and meanwhile is None:
            rows = driver.rows(conn, *stmt)
        else:
            with driver.meanwhile(conn, (stmt,)) as (answer,):
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


def check_duplicates(driver: Portable, conn: Any, keys: list[tuple[str, str, str, str]]) -> None:
    """Fires that got no row must be duplicates (their run key exists): anything else cannot
    happen while every insert of a run locks its routine first; if it did, roll back, loudly.
    A statement only when some fire got no row."""
    existing: set[tuple[Any, ...]] = set()
    for chunk in driver.chunks(keys):
        stmt, params = driver.existing_runs(chunk)
        existing.update(tuple(row) for row in conn.execute(stmt, params).all())
    for key in keys:
        if key not in existing:
            raise StoreConflict(f"fire {'/'.join(key)} could not be recorded; nothing was claimed")


class ManualMixin(SqlBase):
    def claim_manual(
        self,
        key: RunKey,
        *,
        now: datetime,
        expires_at: datetime,
        resend_at: datetime,
        actor: str | None = None,
    ) -> ClaimResult:
        """Tenant, ONE transaction: lock the routine row, then insert a ``claimed`` manual run (and
        its ``trigger`` event)."""
        args = claim_manual_args(key, now, expires_at, resend_at)
        actor = audit.check_actor(actor)
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
                append(conn, rk, audit.entry("trigger", now, actor, routine, routine, reason=run_id, always=True))
                return ClaimResult(True, run_from_row(row), "won")
            existing = conn.execute(q.SELECT_RUN, q.run_params(key)).first()
            return ClaimResult(False, run_from_row(existing) if existing is not None else None, "duplicate")
