"""The in-memory reference store: every method of :class:`~alma_schedule.stores.base.Store`, exactly
as its docstrings say, and nothing more.
docs/architecture.md, section "The modules, in detail" (stores/memory/store.py).
"""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta
from typing import Any

from alma_schedule.errors import NotFound, RegistrationRefused, StoreConflict
from alma_schedule.model import (
    Backfill,
    Routine,
    RoutineVersion,
    RunRecord,
    Scope,
    TickMinute,
    TickProbe,
)
from alma_schedule.model.calendar import Calendar
from alma_schedule.model.events import RoutineEvent
from alma_schedule.model.provenance import check_disabled_reason
from alma_schedule.policies import audit, incarnation, limits
from alma_schedule.stores.arguments import (
    PutRoutineArgs,
    age_args,
    list_routines_args,
    put_routine_args,
    set_enabled_args,
    set_paused_args,
)
from alma_schedule.stores.base import RenamedMethods
from alma_schedule.stores.memory.backfills import BackfillsMixin
from alma_schedule.stores.memory.calendars import CalendarsMixin
from alma_schedule.stores.memory.events import EventsMixin
from alma_schedule.stores.memory.fleet import FleetMixin
from alma_schedule.stores.memory.overdue import OverdueMixin
from alma_schedule.stores.memory.reads import ReadsMixin
from alma_schedule.stores.memory.record import RecordMixin
from alma_schedule.stores.memory.rederive import RederiveMixin
from alma_schedule.stores.memory.retention import RetentionMixin
from alma_schedule.stores.memory.tick import TickMixin
from alma_schedule.stores.memory.ticklog import TickLogMixin
from alma_schedule.stores.memory.wake import WakeMixin
from alma_schedule.stores.put_many import put_routines_args
from alma_schedule.stores.validation import check_limit, check_routine_key
from alma_schedule.stores.validation import require_utc as _utc

RKey = tuple[str, str, str]

__all__ = ["MemoryStore"]


class MemoryStore(
    RecordMixin,
    TickMixin,
    ReadsMixin,
    WakeMixin,
    RederiveMixin,
    BackfillsMixin,
    TickLogMixin,
    RetentionMixin,
    EventsMixin,
    CalendarsMixin,
    OverdueMixin,
    FleetMixin,
    RenamedMethods,
):
    """The reference backend: thread-safe (one RLock), instance-scoped, exact."""

    #: One lock serializes every transaction: concurrent claims would only queue (``Store.claim_concurrency``).
    claim_concurrency = 1

    def __init__(self) -> None:
        self._lock = threading.RLock()
        # routine rows; schedule/definition are kept as canonical JSON text in _bodies
        self._routines: dict[RKey, Routine] = {}
        self._bodies: dict[RKey, tuple[str, str]] = {}
        self._versions: dict[RKey, list[RoutineVersion]] = {}
        self._runs: dict[RKey, dict[str, RunRecord]] = {}
        self._active: dict[RKey, str] = {}  # routine -> run_id of its one non-terminal run
        self._buffered: dict[RKey, str] = {}  # routine -> run_id of its one buffered fire (overlap latest)
        self._spend: dict[tuple[str, str], int] = {}
        self._heartbeat: datetime | None = None
        self._calendars: dict[str, Calendar] = {}  # business calendars by name (system data)
        self._next_wake: datetime | None = None
        self._zone_data: str | None = None
        self._zone_cursor: RKey | None = None
        self._backfills: dict[RKey, Backfill] = {}  # routine -> its backfill range
        self._tick_log: dict[datetime, TickMinute] = {}
        self._events: list[RoutineEvent] = []  # the audit trail, append order (stores/memory/events.py)
        self._event_seq = 0

    # ------------------------------------------------------------------ internals

    def _out(self, key: RKey) -> Routine:
        schedule, definition = self._bodies[key]
        return dataclasses.replace(
            self._routines[key], schedule=json.loads(schedule), definition=json.loads(definition)
        )

    def _write(self, row: Routine) -> None:
        if row.inactive_reason is not None and row.next_due_at is not None:
            row = dataclasses.replace(row, next_due_at=None)  # the invariant: NULL while inactive
        self._routines[(row.org, row.uid, row.routine_id)] = row

    def _count_start(self, key: RKey, origin: str, now: datetime) -> bool:
        """``max_runs``: count the start of a run of ``origin`` on its routine (and clear the index
        at the limit), in the start's own step; False when it would pass the limit
        (:func:`alma_schedule.policies.limits.count_start`)."""
        row = self._routines[key]
        limit = limits.limit_of(json.loads(self._bodies[key][0]))
        counted = limits.count_start(row.schedule_starts, limit, origin)
        if counted is None:
            return False
        starts, done = counted
        if starts != row.schedule_starts:
            due = None if done else row.next_due_at
            self._write(dataclasses.replace(row, schedule_starts=starts, next_due_at=due, updated_at=now))
        return True

    def _live(self, scope: Scope, routine_id: str) -> tuple[RKey, Routine]:
        key = check_routine_key(scope, routine_id)
        row = self._routines.get(key)
        if row is None or row.deleted_at is not None:
            raise NotFound.of("routine", f"{scope}/{routine_id}")
        return key, row

    # ------------------------------------------------------------------ routines (tenant)

    def put_routine(
        self, routine: Routine, *, now: datetime, expected_revision: str | None = None, actor: str | None = None
    ) -> Routine:
        args = put_routine_args(routine, now)
        actor = audit.check_actor(actor)
        with self._lock:
            self._check_put(routine, args.key, expected_revision)
            return self._put(routine, args, actor)

    def put_routines(
        self, routines: Sequence[tuple[Routine, str | None]], *, now: datetime, actor: str | None = None
    ) -> list[Routine]:
        checked = put_routines_args(routines, now)
        actor = audit.check_actor(actor)
        with self._lock:  # every check before the first write: all or nothing
            for routine, args, expected in checked:
                self._check_put(routine, args.key, expected)
            return [self._put(routine, args, actor) for routine, args, _ in checked]

    def _check_put(self, routine: Routine, key: RKey, expected_revision: str | None) -> None:
        old = self._routines.get(key)
        live = old is not None and old.deleted_at is None
        current = old.config_revision if (old is not None and live) else None
        if expected_revision != current:
            raise StoreConflict(
                f"routine {routine.key} is at revision {current!r}, not the expected {expected_revision!r}"
            )
        if old is not None and not live and key in self._active:
            blocking = self._runs[key][self._active[key]]
            raise RegistrationRefused(
                f"routine {routine.key} was deleted and its run {blocking.run_id} is still {blocking.state}",
                blocking_run=blocking,
            )

    def _put(self, routine: Routine, args: PutRoutineArgs, actor: str | None = None) -> Routine:
        key, schedule, definition, now = args.key, args.schedule, args.definition, args.now
        fields: dict[str, Any] = dict(args.fields)
        old = self._routines.get(key)
        before = self._out(key) if old is not None and old.deleted_at is None else None
        if old is not None and old.deleted_at is None:
            row = dataclasses.replace(old, **fields, updated_at=now)
        else:
            row = dataclasses.replace(
                routine,
                **fields,
                schedule={},
                definition={},
                **incarnation.fresh(now),
            )
        history = self._versions.setdefault(key, [])
        if not history or history[-1].config_revision != routine.config_revision:
            history.append(
                RoutineVersion(
                    *key, routine.config_revision, routine.kind, json.loads(schedule), json.loads(definition), now
                )
            )
        self._bodies[key] = (schedule, definition)
        self._write(dataclasses.replace(row, schedule={}, definition={}))
        stored = self._out(key)
        self._append(key, audit.entry(audit.put_action(before, routine), now, actor, before, stored))
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
        _, now, due = set_enabled_args(scope, routine_id, now, next_due_at)
        check_disabled_reason(enabled, reason)
        actor = audit.check_actor(actor)
        with self._lock:
            key, row = self._live(scope, routine_id)
            if row.enabled != enabled:
                before = self._out(key)
                if enabled:
                    row = dataclasses.replace(
                        row, enabled=True, last_fire=now, consecutive_failures=0, next_due_at=due, disabled_reason=None
                    )
                else:
                    row = dataclasses.replace(row, enabled=False, next_due_at=None, disabled_reason=reason)
                self._write(dataclasses.replace(row, updated_at=now))
                action = "enable" if enabled else "disable"
                self._append(key, audit.entry(action, now, actor, before, self._out(key), reason=reason))
            return self._out(key)

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
        _, now, due = set_paused_args(scope, routine_id, reason, now, next_due_at)
        actor = audit.check_actor(actor)
        with self._lock:
            key, row = self._live(scope, routine_id)
            before = self._out(key)
            if reason is not None and row.paused_reason is None:
                self._write(dataclasses.replace(row, paused_reason=reason, next_due_at=None, updated_at=now))
                self._append(key, audit.entry("pause", now, actor, before, self._out(key), reason=reason))
            elif reason is None and row.paused_reason is not None:
                self._write(
                    dataclasses.replace(
                        row,
                        paused_reason=None,
                        consecutive_failures=0,
                        last_fire=now,
                        next_due_at=due,
                        updated_at=now,
                    )
                )
                self._append(key, audit.entry("resume", now, actor, before, self._out(key)))
            return self._out(key)

    def delete_routine(self, scope: Scope, routine_id: str, *, now: datetime, actor: str | None = None) -> Routine:
        now = _utc("now", now)
        key = check_routine_key(scope, routine_id)
        actor = audit.check_actor(actor)
        with self._lock:
            row = self._routines.get(key)
            if row is None:
                raise NotFound.of("routine", f"{scope}/{routine_id}")
            if row.deleted_at is None:
                before = self._out(key)
                self._write(dataclasses.replace(row, deleted_at=now, next_due_at=None, updated_at=now))
                self._append(key, audit.entry("delete", now, actor, before, self._out(key)))
            return self._out(key)

    def get_routine(self, scope: Scope, routine_id: str, *, include_deleted: bool = False) -> Routine | None:
        key = check_routine_key(scope, routine_id)
        with self._lock:
            row = self._routines.get(key)
            if row is None or (row.deleted_at is not None and not include_deleted):
                return None
            return self._out(key)

    def list_routines(
        self, scope: Scope, *, include_deleted: bool = False, limit: int = 1000, after: str | None = None
    ) -> list[Routine]:
        limit, after = list_routines_args(scope, limit, after)
        with self._lock:
            keys = sorted(
                k
                for k, row in self._routines.items()
                if k[0] == scope.org
                and k[1] == scope.uid
                and (after is None or k[2] > after)
                and (include_deleted or row.deleted_at is None)
            )
            return [self._out(k) for k in keys[:limit]]

    def routine_versions(self, scope: Scope, routine_id: str) -> list[RoutineVersion]:
        key = check_routine_key(scope, routine_id)
        with self._lock:
            return list(self._versions.get(key, ()))

    # ------------------------------------------------------------------ system reads / maintenance

    def probe_tick(self, now: datetime, run_time_limit: timedelta) -> TickProbe:
        now, _, _ = age_args("run_time_limit", now, run_time_limit, 1, times=2)
        with self._lock:  # each flag: the step's own selection, non-empty
            return TickProbe(
                due=bool(self._due(now, 1)),
                backfills=any(b.pending for b in self._backfills.values()),
                resends=bool(self._resendable(now, 1)),
                expiries=bool(self._expiring(now, 1)),
                polls=bool(self._pollable(now, 1)),
                expired_results=bool(self._erasable(now)),
                purge=any(r.deleted_at is not None and k not in self._active for k, r in self._routines.items()),
                blocked=bool(self.blocked(now, run_time_limit, 1)),
                erroring=self.erroring(1).count > 0,
            )

    def list_inactive(self, limit: int = 1000) -> list[Routine]:
        limit = check_limit("limit", limit)
        with self._lock:
            keys = sorted(
                k for k, r in self._routines.items() if r.deleted_at is None and r.inactive_reason is not None
            )
            return [self._out(k) for k in keys[:limit]]

    def iter_routines(self, batch: int = 1000) -> Iterator[Routine]:
        batch = check_limit("batch", batch)
        after: RKey | None = None
        size = max(batch, 1)
        while True:
            with self._lock:
                keys = sorted(k for k in self._routines if after is None or k > after)[:size]
                page = [self._out(k) for k in keys]
            yield from page
            if len(keys) < size:
                return
            after = keys[-1]

    def purge_deleted(self, limit: int = 1000) -> int:
        limit = check_limit("limit", limit)
        with self._lock:
            keys = sorted(k for k, r in self._routines.items() if r.deleted_at is not None and k not in self._active)[
                :limit
            ]
            for k in keys:
                del self._routines[k], self._bodies[k]
                self._versions.pop(k, None)
                self._runs.pop(k, None)
                self._buffered.pop(k, None)
                self._backfills.pop(k, None)
            return len(keys)

    def close(self) -> None:
        """Nothing to release: the state lives as long as the instance."""
