"""Routine writes and reads of :class:`~alma_schedule.stores.sql.SqlStore` (tenant operations).
docs/architecture.md, section "The modules, in detail" (stores/sql/store_routines.py).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy.engine import Connection

from alma_schedule.compat.sqlalchemy import row_mapping
from alma_schedule.errors import NotFound, RegistrationRefused, StoreConflict
from alma_schedule.model import Routine, RoutineVersion, Scope
from alma_schedule.model.provenance import check_disabled_reason
from alma_schedule.policies import audit, incarnation
from alma_schedule.stores.arguments import (
    PutRoutineArgs,
    list_routines_args,
    put_routine_args,
    set_enabled_args,
    set_paused_args,
)
from alma_schedule.stores.put_many import put_routines_args
from alma_schedule.stores.sql import queries as q
from alma_schedule.stores.sql.rows import routine_from_row, routine_values, run_from_row, version_from_row
from alma_schedule.stores.sql.store_base import RKey, SqlBase
from alma_schedule.stores.sql.store_events import append
from alma_schedule.stores.validation import check_routine_key, check_text, require_utc


def _invariant(row: Routine) -> Routine:
    if row.inactive_reason is not None and row.next_due_at is not None:
        return dataclasses.replace(row, next_due_at=None)
    return row


class RoutinesMixin(SqlBase):
    def _locked_live(self, conn: Connection, key: RKey) -> Routine:
        row = conn.execute(q.select_routine(*key, lock=True)).first()
        if row is None or row_mapping(row)["deleted_at"] is not None:
            raise NotFound.of("routine", f"{key[0]}/{key[1]}/{key[2]}")
        return routine_from_row(row)

    def _update(self, conn: Connection, key: RKey, values: dict[str, Any]) -> Routine:
        return routine_from_row(conn.execute(q.update_routine(*key, values)).one())

    def put_routine(
        self, routine: Routine, *, now: datetime, expected_revision: str | None = None, actor: str | None = None
    ) -> Routine:
        """Register or re-register (tenant, ONE transaction): see :meth:`Store.put_routine`."""
        args = put_routine_args(routine, now)
        check_text("paused_reason", routine.paused_reason)
        actor = audit.check_actor(actor)
        with self._tx() as conn:
            return self._put(conn, routine, args, expected_revision, actor)

    def put_routines(
        self, routines: Sequence[tuple[Routine, str | None]], *, now: datetime, actor: str | None = None
    ) -> list[Routine]:
        """Many ``put_routine`` in ONE transaction (tenant): see :meth:`Store.put_routines`."""
        checked = put_routines_args(routines, now)
        actor = audit.check_actor(actor)
        with self._tx() as conn:
            return [self._put(conn, routine, args, expected, actor) for routine, args, expected in checked]

    def _put(
        self,
        conn: Connection,
        routine: Routine,
        args: PutRoutineArgs,
        expected_revision: str | None,
        actor: str | None = None,
    ) -> Routine:
        key, now = args.key, args.now
        schedule = json.loads(args.schedule)
        definition = json.loads(args.definition)
        fields: dict[str, Any] = {**args.fields, "schedule": schedule, "definition": definition}
        found = conn.execute(q.select_routine(*key, lock=True)).first()
        old = routine_from_row(found) if found is not None else None
        live = old is not None and old.deleted_at is None
        current = old.config_revision if (old is not None and live) else None
        if expected_revision != current:
            raise StoreConflict(
                f"routine {routine.key} is at revision {current!r}, not the expected {expected_revision!r}"
            )
        if old is not None and not live:
            blocking = conn.execute(q.select_open_run(*key)).first()
            if blocking is not None:
                rec = run_from_row(blocking)
                raise RegistrationRefused(
                    f"routine {routine.key} was deleted and its run {rec.run_id} is still {rec.state}",
                    blocking_run=rec,
                )
        if old is not None and live:
            row = dataclasses.replace(old, **fields, updated_at=now)
        else:
            row = dataclasses.replace(
                routine,
                **fields,
                **incarnation.fresh(now),
            )
        values = routine_values(_invariant(row))
        if old is None:
            stored = routine_from_row(conn.execute(q.insert_routine(values)).one())
        else:
            stored = self._update(conn, key, values)
        latest = conn.execute(q.latest_version(*key)).first()
        if latest is None or latest.config_revision != routine.config_revision:
            conn.execute(
                q.insert_version(
                    {
                        "org": key[0],
                        "uid": key[1],
                        "routine_id": key[2],
                        "version": 1 if latest is None else latest.version + 1,
                        "config_revision": routine.config_revision,
                        "kind": routine.kind,
                        "schedule": schedule,
                        "definition": definition,
                        "created_at": now,
                    }
                )
            )
        before = old if live else None
        append(conn, key, audit.entry(audit.put_action(before, routine), now, actor, before, stored))
        return stored

    def set_enabled(
        self,
        scope: Scope,
        routine_id: str,
        enabled: bool,
        *,
        now: datetime,
        next_due_at: datetime | None,
        reason: str | None = None,
        actor: str | None = None,
    ) -> Routine:
        """Disable (with ``reason``) / enable (restart the cursor at now). Tenant, ONE transaction;
        no-op if unchanged."""
        key, now, due = set_enabled_args(scope, routine_id, now, next_due_at)
        check_disabled_reason(enabled, reason)
        actor = audit.check_actor(actor)
        with self._tx() as conn:
            row = self._locked_live(conn, key)
            if row.enabled == enabled:
                return row
            if enabled:
                new = dataclasses.replace(row, enabled=True, last_fire=now, consecutive_failures=0, next_due_at=due)
            else:
                new = dataclasses.replace(row, enabled=False, next_due_at=None)
            new = _invariant(new)
            stored = self._update(
                conn,
                key,
                {
                    "enabled": new.enabled,
                    "last_fire": new.last_fire,
                    "consecutive_failures": new.consecutive_failures,
                    "next_due_at": new.next_due_at,
                    "disabled_reason": None if enabled else reason,
                    "updated_at": now,
                },
            )
            action = "enable" if enabled else "disable"
            append(conn, key, audit.entry(action, now, actor, row, stored, reason=reason))
            return stored

    def set_paused(
        self,
        scope: Scope,
        routine_id: str,
        reason: str | None,
        *,
        now: datetime,
        next_due_at: datetime | None,
        actor: str | None = None,
    ) -> Routine:
        """Pause (the first reason wins) / resume (restart at now, streak 0). Tenant, ONE transaction."""
        key, now, due = set_paused_args(scope, routine_id, reason, now, next_due_at)
        actor = audit.check_actor(actor)
        with self._tx() as conn:
            row = self._locked_live(conn, key)
            if reason is not None and row.paused_reason is None:
                paused = self._update(conn, key, {"paused_reason": reason, "next_due_at": None, "updated_at": now})
                append(conn, key, audit.entry("pause", now, actor, row, paused, reason=reason))
                return paused
            if reason is None and row.paused_reason is not None:
                new = _invariant(
                    dataclasses.replace(row, paused_reason=None, consecutive_failures=0, last_fire=now, next_due_at=due)
                )
                resumed = self._update(
                    conn,
                    key,
                    {
                        "paused_reason": None,
                        "consecutive_failures": 0,
                        "last_fire": now,
                        "next_due_at": new.next_due_at,
                        "updated_at": now,
                    },
                )
                append(conn, key, audit.entry("resume", now, actor, row, resumed))
                return resumed
            return row

    def delete_routine(self, scope: Scope, routine_id: str, *, now: datetime, actor: str | None = None) -> Routine:
        """Tombstone (tenant, ONE transaction, idempotent); :class:`NotFound` for an unknown id."""
        now = require_utc("now", now)
        key = check_routine_key(scope, routine_id)
        actor = audit.check_actor(actor)
        with self._tx() as conn:
            found = conn.execute(q.select_routine(*key, lock=True)).first()
            if found is None:
                raise NotFound.of("routine", f"{scope}/{routine_id}")
            row = routine_from_row(found)
            if row.deleted_at is not None:
                return row
            gone = self._update(conn, key, {"deleted_at": now, "next_due_at": None, "updated_at": now})
            append(conn, key, audit.entry("delete", now, actor, row, gone))
            return gone

    def get_routine(self, scope: Scope, routine_id: str, *, include_deleted: bool = False) -> Routine | None:
        key = check_routine_key(scope, routine_id)
        with self._tx(read=True) as conn:
            found = conn.execute(q.select_routine(*key)).first()
        if found is None:
            return None
        row = routine_from_row(found)
        return None if (row.deleted_at is not None and not include_deleted) else row

    def list_routines(
        self, scope: Scope, *, include_deleted: bool = False, limit: int = 1000, after: str | None = None
    ) -> list[Routine]:
        limit, after = list_routines_args(scope, limit, after)
        stmt = q.list_routines(scope.org, scope.uid, include_deleted=include_deleted, limit=limit, after=after)
        with self._tx(read=True) as conn:
            return [routine_from_row(r) for r in conn.execute(stmt).all()]

    def routine_versions(self, scope: Scope, routine_id: str) -> list[RoutineVersion]:
        key = check_routine_key(scope, routine_id)
        with self._tx(read=True) as conn:
            return [version_from_row(r) for r in conn.execute(q.select_versions(*key)).all()]
