"""A routine: what a tenant registers (:class:`RoutineSpec`), the stored row, and its version history."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from alma_schedule.model.data import Data
from alma_schedule.model.keys import RoutineKey, Scope, trusted

__all__ = ["ROUTINE_STATES", "Routine", "RoutineSpec", "RoutineVersion"]

#: The states a routine listing filters on (``routines list --all --state``); see
#: :meth:`alma_schedule.stores.base.Store.system_routines` for what each means.
ROUTINE_STATES: tuple[str, ...] = ("enabled", "paused", "disabled", "finished", "erroring")


@dataclass(frozen=True, slots=True)
class RoutineSpec(Data):
    """What a tenant registers: the input of ``Scheduler.register``."""

    org: str
    uid: str
    routine_id: str
    kind: str
    schedule: Mapping[str, Any]
    definition: Mapping[str, Any] = field(default_factory=dict)
    #: Provenance (:mod:`alma_schedule.model.provenance`): who creates the routine (None: ``api``),
    #: and the ``beat_schedule`` (or imported) entry it came from.
    source: str | None = None
    source_entry: str | None = None

    @property
    def key(self) -> RoutineKey:
        return trusted(RoutineKey, self.org, self.uid, self.routine_id)

    @property
    def scope(self) -> Scope:
        return trusted(Scope, self.org, self.uid)


@dataclass(frozen=True, slots=True)
class Routine(Data):
    """A stored routine row. ``next_due_at`` is derived (NULL while paused, disabled or deleted)."""

    org: str
    uid: str
    routine_id: str
    kind: str
    schedule: Mapping[str, Any]
    definition: Mapping[str, Any]
    registered_at: datetime
    config_revision: str
    enabled: bool = True
    paused_reason: str | None = None
    consecutive_failures: int = 0
    last_fire: datetime | None = None
    next_due_at: datetime | None = None
    deleted_at: datetime | None = None
    defer_until: datetime | None = None
    last_error: str | None = None
    error_count: int = 0
    tzdata_version: str | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    #: schedule fires claimed while the routine has ``max_runs`` (the claim transaction counts them;
    #: manual runs, skipped fires and re-registration never change it). Information only since
    #: ``max_runs`` counts starts (:attr:`schedule_starts`); revision 0008 seeded those from it.
    schedule_claims: int = 0
    #: The latest fire instant whose run row ``prune`` deleted (raised in the prune's transaction):
    #: a backfill only reaches fires after it, so a pruned fire that ran is never run again.
    pruned_through: datetime | None = None
    #: The schedule's fires that no claim took (collapsed: downtime, an expired tick, a clock slower
    #: than the routine): counted by the claim that moved the cursor past them, with no run row
    #: (:mod:`alma_schedule.policies.missed`); a new incarnation starts at 0.
    fires_missed: int = 0
    #: A claim's count reached :data:`alma_schedule.policies.missed.CAP` and stopped there: the
    #: count is a lower bound, shown ``10,000+``.
    fires_missed_capped: bool = False
    #: ``max_runs``' count: schedule fires STARTED (the ``claimed -> running`` CAS counts them in
    #: its own statement; :mod:`alma_schedule.policies.limits`). A claim that never starts
    #: (superseded, expired, skipped) counts nothing; a new incarnation starts at 0.
    schedule_starts: int = 0
    #: Provenance: who created this incarnation (kept by re-registration) and the entry it came from
    #: (:mod:`alma_schedule.model.provenance`); None on rows from before revision 0009.
    source: str | None = None
    source_entry: str | None = None
    #: Why a disabled routine is disabled, when the disabler said (``removed from beat_schedule``).
    disabled_reason: str | None = None

    @property
    def key(self) -> RoutineKey:
        return trusted(RoutineKey, self.org, self.uid, self.routine_id)

    @property
    def scope(self) -> Scope:
        return trusted(Scope, self.org, self.uid)

    @property
    def state_names(self) -> tuple[str, ...]:
        """The :data:`ROUTINE_STATES` this live row is in (``erroring`` beside one of the others)."""
        if not self.enabled:
            main = "disabled"
        elif self.paused_reason is not None:
            main = "paused"
        elif self.next_due_at is None:
            main = "finished"
        else:
            main = "enabled"
        return (main, "erroring") if self.error_count > 0 else (main,)

    @property
    def inactive_reason(self) -> str | None:
        """``deleted``, ``disabled`` or ``paused`` (in that order of precedence), else None."""
        if self.deleted_at is not None:
            return "deleted"
        if not self.enabled:
            return "disabled"
        if self.paused_reason is not None:
            return "paused"
        return None


@dataclass(frozen=True, slots=True)
class RoutineVersion(Data):
    """One entry of a routine's immutable version history."""

    org: str
    uid: str
    routine_id: str
    config_revision: str
    kind: str
    schedule: Mapping[str, Any]
    definition: Mapping[str, Any]
    created_at: datetime
