"""``register``: put a routine through the schedule, so what a tick could not run is refused now.

docs/architecture.md, section "The modules, in detail" (engine/register.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from alma_schedule.core import (
    After,
    At,
    Every,
    SchedulePolicy,
    ScheduleValue,
    bounded_next_fire,
    bounded_next_fires,
    latest_fire,
    parse_policy,
    parse_schedule,
    policy_of,
    validate_schedule,
)
from alma_schedule.core.interval import format_interval
from alma_schedule.errors import InvalidInput, InvalidSchedule, NotFound, RegistrationRefused, StoreConflict
from alma_schedule.model import HasRevisionInputs, Routine, RoutineSpec, aware_utc, check_new_id, provenance
from alma_schedule.policies.audit import check_actor
from alma_schedule.policies.fixed_delay import delay_of, restart_after
from alma_schedule.policies.jitter import due_at, jitter_refusal
from alma_schedule.policies.overdue import expect_refusal
from alma_schedule.policies.ownership import is_untracked_task
from alma_schedule.policies.wake import FIXED_CADENCE_NOTE

from .calendars import check_calendar_of
from .decide import claims_left, due_of
from .limits import check_registration
from .revision import canonical_json, config_revision
from .runtime import Runtime, UnknownKind

__all__ = ["Prepared", "RegisterMode", "RegistrationReceipt", "prepare", "register"]

#: What ``register`` may do to an existing id: anything (``upsert``), only create, only update.
RegisterMode = Literal["upsert", "create", "update"]
MODES: tuple[str, ...] = ("upsert", "create", "update")

SECOND = timedelta(seconds=1)
ATTEMPTS = 3
PREVIEW = 3


@dataclass(frozen=True, slots=True)
class RegistrationReceipt:
    """What ``register`` did: the stored routine, its next fires, warnings, and whether it changed."""

    routine: Routine
    next_fires: tuple[datetime, ...]
    warnings: tuple[str, ...] = ()
    changed: bool = True

    def to_dict(self) -> dict[str, Any]:
        return {
            "routine": self.routine.to_dict(),
            "next_fires": [f.isoformat() for f in self.next_fires],
            "warnings": list(self.warnings),
            "changed": self.changed,
        }


def _canonical_schedule(value: Mapping[str, Any]) -> str | None:
    try:
        return canonical_json(parse_schedule(value).to_json())
    except (InvalidSchedule, InvalidInput):
        return None


def _anchor_moves(old: Mapping[str, Any], new: ScheduleValue) -> bool:
    """True when ``registered_at`` must move: the type becomes ``every`` or its interval changes."""
    if not isinstance(new, Every):
        return False
    try:
        before = parse_schedule(old)
    except InvalidSchedule:
        return True
    return not isinstance(before, Every) or before.interval != new.interval


def _policy(schedule: Mapping[str, Any]) -> SchedulePolicy | None:
    try:
        return policy_of(schedule)
    except InvalidSchedule:
        return None


def due_from(routine: Routine, schedule: ScheduleValue, policy: SchedulePolicy, after: datetime) -> datetime | None:
    """``next_due_at`` of a routine whose cursor restarts after ``after`` (were it active): the first
    fire in the bounds (the bounds read the nominal instant) as its due instant ``f + o(f)`` (its
    ``jitter`` applied), None once ``max_runs`` is reached (also used by resume, enable, reindex
    and the zone data reconciliation)."""
    if claims_left(routine, policy) == 0:
        return None
    delay = delay_of(schedule)
    if delay is not None and after >= routine.registered_at:  # a fixed delay restarts at ``after``
        waiting = routine.inactive_reason is None and routine.next_due_at is None and routine.last_fire is not None
        return None if waiting else restart_after(routine, delay, policy, after)  # waiting: its run's end sets it
    fire = bounded_next_fire(schedule, routine.registered_at, after, policy)
    if fire is None or not policy.jitter:
        return fire
    key = (routine.org, routine.uid, routine.routine_id)
    return due_at(schedule, routine.registered_at, key, policy.jitter, fire)


def restart_due(routine: Routine, at: datetime) -> datetime | None:
    """``next_due_at`` for a cursor restarted at ``at``, inside the routine's bounds and ``max_runs``
    (a bad row: ``at``, so the tick reports it)."""
    try:
        return due_from(routine, parse_schedule(routine.schedule), policy_of(routine.schedule), at)
    except InvalidSchedule:
        return at


def rederived_due(routine: Routine) -> datetime | None:
    """``next_due_at`` derived again from the routine's cursor under today's rules and zone data
    (``reindex``, the zone data reconciliation): the first fire after the cursor, or, before the
    first fire, at or after ``registered_at`` (as registration derives it)."""
    if "after" in routine.schedule:  # a fixed delay's next fire is data, not a rule: nothing to derive
        return routine.next_due_at
    if routine.last_fire is not None:
        return restart_due(routine, routine.last_fire)
    return restart_due(routine, routine.registered_at - SECOND)


def _candidate(
    spec: RoutineSpec,
    schedule: ScheduleValue,
    policy: SchedulePolicy,
    sched_json: dict[str, Any],
    live: Routine | None,
    at: datetime,
) -> Routine:
    if live is None:
        anchor = at.replace(microsecond=0)
        new = Routine(
            org=spec.org,
            uid=spec.uid,
            routine_id=spec.routine_id,
            kind=spec.kind,
            schedule=sched_json,
            definition=dict(spec.definition),
            registered_at=anchor,
            config_revision="",
            source=spec.source or provenance.API,
            source_entry=spec.source_entry,
        )
        return dataclasses.replace(new, next_due_at=due_from(new, schedule, policy, anchor - SECOND))
    if _canonical_schedule(live.schedule) == canonical_json(schedule.to_json()):  # same timing
        kept = dataclasses.replace(live, kind=spec.kind, schedule=sched_json, definition=dict(spec.definition))
        if _policy(live.schedule) == policy or live.inactive_reason is not None:
            return kept
        # a policy changed (bounds, max_runs...): the index is re-derived from the kept cursor
        after = live.last_fire if live.last_fire is not None else live.registered_at - SECOND
        return dataclasses.replace(kept, next_due_at=due_from(kept, schedule, policy, after))
    anchor = at.replace(microsecond=0) if _anchor_moves(live.schedule, schedule) else live.registered_at
    moved = dataclasses.replace(
        live,
        kind=spec.kind,
        schedule=sched_json,
        definition=dict(spec.definition),
        registered_at=anchor,
        last_fire=at,
    )
    active = live.inactive_reason is None
    return dataclasses.replace(moved, next_due_at=due_from(moved, schedule, policy, at) if active else None)


def _receipt(
    routine: Routine,
    schedule: ScheduleValue,
    policy: SchedulePolicy,
    at: datetime,
    warnings: list[str],
    changed: bool,
) -> RegistrationReceipt:
    if isinstance(schedule, After):  # one pending fire at most: the index itself
        pending_fire = () if routine.next_due_at is None else (routine.next_due_at,)
        return RegistrationReceipt(routine, pending_fire, tuple(warnings), changed)
    after = at
    if routine.next_due_at is not None:
        # the nominal fire behind the index (a due instant is under half a gap past its fire)
        pending = latest_fire(schedule, routine.registered_at, routine.next_due_at)
        if pending is not None and pending <= at:
            after = pending - SECOND
    left = claims_left(routine, policy)
    count = PREVIEW if left is None else min(PREVIEW, left)
    nominal = bounded_next_fires(schedule, routine.registered_at, after, count, policy)
    fires = tuple(due_of(routine, f, schedule) or f for f in nominal)  # the jittered instants
    return RegistrationReceipt(routine, fires, tuple(warnings), changed)


def check_instants(schedule: ScheduleValue, policy: SchedulePolicy) -> None:
    """An ``at`` or a ``not_before`` outside the supported range (``model.time``: 1970-01-01 to
    9000-01-01) would be the routine's index: refused naming the field the user wrote, never the
    column it would have reached (``next_due_at``). A far ``not_after`` is fine: it only ends."""
    named = [("at", schedule.when)] if isinstance(schedule, At) else []
    if policy.not_before is not None:
        named.append(("not_before", policy.not_before))
    for name, instant in named:
        try:
            aware_utc(repr(name), instant)
        except InvalidInput as exc:
            raise RegistrationRefused(str(exc)) from None


def check_catch_up(policy: SchedulePolicy, hint_poll: timedelta, clock_tolerance: timedelta) -> None:
    """``catch_up`` shorter than the clock's hint poll plus its tolerance could miss every fire:
    refused. (A clock that follows the hint ticks within ``hint_poll`` of any due instant; a
    fixed-cadence clock slower than ``catch_up`` loses those fires, and they are counted.)"""
    if policy.catch_up is None or policy.catch_up >= hint_poll + clock_tolerance:
        return
    raise RegistrationRefused(
        f"'catch_up' {format_interval(policy.catch_up)} is shorter than hint_poll "
        f"({format_interval(hint_poll)}) + clock_tolerance ({format_interval(clock_tolerance)}): "
        "a fire could close before any tick sees it (ALMA_HINT_POLL, ALMA_CLOCK_TOLERANCE)"
    )


def _refusal(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


@dataclass(frozen=True, slots=True)
class Prepared:
    """What ``register`` would write for a spec (nothing written yet): the row, the live row it replaces,
    the parsed timing; ``changed`` False when the live row already has this revision."""

    routine: Routine
    live: Routine | None
    schedule: ScheduleValue
    policy: SchedulePolicy
    at: datetime
    warnings: tuple[str, ...]

    @property
    def changed(self) -> bool:
        return self.live is None or self.live.config_revision != self.routine.config_revision

    def receipt(self, stored: Routine | None = None) -> RegistrationReceipt:
        """The receipt of ``stored`` (written), or of the live row when nothing changed."""
        row = stored if stored is not None else (self.live or self.routine)
        return _receipt(row, self.schedule, self.policy, self.at, list(self.warnings), stored is not None)


_Checked = tuple[datetime, ScheduleValue, SchedulePolicy, dict[str, Any], list[str]]


def _check(rt: Runtime, spec: RoutineSpec, now: datetime | None, mode: RegisterMode) -> _Checked:
    if not isinstance(spec, RoutineSpec):
        raise InvalidInput(f"register takes a RoutineSpec, not {type(spec).__name__}")
    if mode not in MODES:
        raise InvalidInput(f"register mode {mode!r} is not one of {', '.join(MODES)}")
    at = rt.now(now)
    # the three ids and the kind, as new ids: no Unicode control or format character either
    # (a row stored before that rule still reads: lookups keep check_id)
    check_new_id("org", spec.org, allow_slash=False)
    check_new_id("uid", spec.uid, allow_slash=False)
    check_new_id("routine_id", spec.routine_id)
    check_new_id("kind", spec.kind)
    provenance.check_source(spec.source, spec.source_entry)
    check_registration(spec, rt.settings)  # the size limits, before anything costly
    try:
        schedule = validate_schedule(spec.schedule, now=at)
        check_calendar_of(schedule, rt.store)  # a named business calendar exists (and is installed)
        # the stored schedule: its timing, canonical, and the policies that differ from the defaults
        policy = parse_policy(spec.schedule)
        sched_json = {**schedule.to_json(), **policy.to_json()}
    except InvalidSchedule as exc:
        raise RegistrationRefused(str(exc)) from exc
    check_instants(schedule, policy)
    check_catch_up(policy, rt.settings.hint_poll, rt.settings.clock_tolerance)
    late = expect_refusal(schedule, policy, at, at, rt.settings.hint_poll)  # the "did not run" alarm
    if late is not None:
        raise RegistrationRefused(late)
    if not isinstance(spec.definition, Mapping):
        raise RegistrationRefused("definition must be a JSON object")
    if isinstance(schedule, After) and is_untracked_task(spec.kind, spec.definition):
        raise RegistrationRefused(
            'an \'after\' task routine must be tracked ("track": true with a "deadline"): its next fire '
            "is due after the fleet task ENDS, and only a tracked run records that end"
        )
    try:
        canonical_json(spec.definition)
    except InvalidInput as exc:
        raise RegistrationRefused(f"definition is {exc}") from None
    warnings: list[str] = []
    if isinstance(schedule, Every) and schedule.interval < rt.settings.tick_period:
        warnings.append(
            f"every {schedule.to_json()['every']} is shorter than the tick period "
            f"({int(rt.settings.tick_period.total_seconds())}s): {FIXED_CADENCE_NOTE}"
        )
    return at, schedule, policy, sched_json, warnings


def _prepare(rt: Runtime, spec: RoutineSpec, checked: _Checked, mode: RegisterMode) -> Prepared:
    at, schedule, policy, sched_json, warnings = checked
    existing = rt.store.get_routine(spec.scope, spec.routine_id, include_deleted=True)
    live = existing if existing is not None and existing.deleted_at is None else None
    if mode == "create" and live is not None:
        raise RegistrationRefused(f"routine {spec.key} already exists")
    if mode == "update" and live is None:
        raise NotFound.of("routine", spec.key)
    candidate = _candidate(spec, schedule, policy, sched_json, live, at)
    refusal = jitter_refusal(schedule, candidate.registered_at, at, policy.jitter)
    if refusal is not None:
        raise RegistrationRefused(refusal)
    try:
        runner = rt.resolve(candidate)
    except UnknownKind as exc:
        raise RegistrationRefused(str(exc)) from exc
    try:
        inputs = runner.config_revision_inputs(candidate) if isinstance(runner, HasRevisionInputs) else None
        revision = config_revision(spec.kind, sched_json, spec.definition, inputs)
        candidate = dataclasses.replace(candidate, config_revision=revision)
        runner.validate(candidate)
    except Exception as exc:
        raise RegistrationRefused(_refusal(exc)) from exc
    return Prepared(candidate, live, schedule, policy, at, tuple(warnings))


def prepare(rt: Runtime, spec: RoutineSpec, now: datetime | None = None, *, mode: RegisterMode = "upsert") -> Prepared:
    """Every check of ``register`` and the row it would write, writing nothing (a batch writes the
    rows itself, :meth:`Store.put_routines`, with ``live``'s revision as the expected one)."""
    return _prepare(rt, spec, _check(rt, spec, now, mode), mode)


def register(
    rt: Runtime,
    spec: RoutineSpec,
    now: datetime | None = None,
    *,
    mode: RegisterMode = "upsert",
    actor: str | None = None,
) -> RegistrationReceipt:
    """Register or re-register ``spec``. See the module docstring for what is checked and kept;
    ``actor`` is who the audit event names (:mod:`alma_schedule.policies.audit`)."""
    actor = check_actor(actor)
    checked = _check(rt, spec, now, mode)
    for _ in range(ATTEMPTS):
        prepared = _prepare(rt, spec, checked, mode)
        if not prepared.changed:
            return prepared.receipt()
        live = prepared.live
        try:
            stored = rt.store.put_routine(
                prepared.routine,
                now=prepared.at,
                expected_revision=None if live is None else live.config_revision,
                actor=actor,
            )
        except StoreConflict:
            continue
        return prepared.receipt(stored)
    raise StoreConflict(f"routine {spec.key} was re-registered concurrently {ATTEMPTS} times; try again")
