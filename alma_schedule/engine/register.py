"""``register``: put a routine through the schedule, so what a tick could not run is refused now.

Steps (the store write is ONE transaction, a compare-and-set on the current revision):

1. validate ids, then the size limits (``engine.limits``: definition and schedule bytes, nesting
   depth, money caps; each refusal names its setting), then the schedule (the core, with ``now``:
   an ``at`` before now is refused) and the definition (JSON); every refusal is
   :class:`RegistrationRefused` with the reason;
2. resolve the runner and ask it to ``validate`` the routine (any exception refuses, its message is
   the reason); an ``every`` shorter than the tick period gets a warning in the receipt;
3. ``config_revision`` = sha256 of (kind, canonical schedule, definition, the runner's optional
   ``config_revision_inputs(routine)``). Unchanged -> no-op (``changed=False``);
4. the cursor: a new routine (or a tombstoned id) starts with no cursor and ``registered_at = now``;
   a SCHEDULE change restarts the cursor at now (``last_fire = now``, ``next_due_at`` re-derived);
   ``registered_at`` (the anchor of ``every``) moves only when the ``every`` interval changes (or the
   type becomes ``every``); a definition-only change keeps the cursor and the index;
   the schedule policies (issue 15): a ``catch_up`` shorter than ``hint_poll + clock_tolerance``
   is refused naming both; ``next_due_at`` is the first fire inside ``not_before``/``not_after``
   (None once ``max_runs`` is reached: the count ``schedule_claims`` is kept); a change of the
   policies alone re-derives it from the kept cursor; the receipt previews fires in the bounds,
   no more than ``max_runs`` still allows; with a ``jitter``, ``next_due_at`` and the receipt's
   fires are due instants ``f + o(f)`` (:mod:`alma_schedule.policies.jitter`), and a jitter at or
   above the smallest gap among the next 1,000 fires is refused naming ``jitter`` and the gap;
5. ``store.put_routine(expected_revision=...)``; a concurrent writer (``StoreConflict``) -> re-read
   and try again (3 times). A tombstoned id whose old runs are non-terminal is refused by the store.

``mode`` (default ``"upsert"``: register or re-register) can narrow it, checked against the row read
inside the compare-and-set loop, so two racing writers cannot both pass: ``"create"`` refuses an id
that already has a live routine (:class:`RegistrationRefused`, "already exists"); ``"update"``
refuses an id with no live routine (:class:`NotFound`). The CLI's ``routines add`` creates,
``routines update`` updates, ``routines add --update`` upserts.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from alma_schedule.core import (
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
from alma_schedule.model import Routine, RoutineSpec, check_new_id
from alma_schedule.policies.jitter import due_at, jitter_refusal
from alma_schedule.policies.wake import FIXED_CADENCE_NOTE

from .decide import claims_left, due_of
from .limits import check_registration
from .revision import canonical_json, config_revision
from .runtime import Runtime, UnknownKind

__all__ = ["RegisterMode", "RegistrationReceipt", "register"]

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
    fire in the bounds (the bounds read the nominal instant) as its DUE instant ``f + o(f)`` (its
    ``jitter`` applied), None once ``max_runs`` is reached (also used by resume, enable, reindex
    and the zone data reconciliation)."""
    if claims_left(routine, policy) == 0:
        return None
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


def register(
    rt: Runtime, spec: RoutineSpec, now: datetime | None = None, *, mode: RegisterMode = "upsert"
) -> RegistrationReceipt:
    """Register or re-register ``spec``. See the module docstring for what is checked and kept."""
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
    check_registration(spec, rt.settings)  # the size limits, before anything costly
    try:
        schedule = validate_schedule(spec.schedule, now=at)
        # the stored schedule: its timing, canonical, and the policies that differ from the defaults
        policy = parse_policy(spec.schedule)
        sched_json = {**schedule.to_json(), **policy.to_json()}
    except InvalidSchedule as exc:
        raise RegistrationRefused(str(exc)) from exc
    check_catch_up(policy, rt.settings.hint_poll, rt.settings.clock_tolerance)
    if not isinstance(spec.definition, Mapping):
        raise RegistrationRefused("definition must be a JSON object")
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
    for _ in range(ATTEMPTS):
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
        inputs_of = getattr(runner, "config_revision_inputs", None)
        try:
            inputs = inputs_of(candidate) if callable(inputs_of) else None
            revision = config_revision(spec.kind, sched_json, spec.definition, inputs)
            candidate = dataclasses.replace(candidate, config_revision=revision)
            runner.validate(candidate)
        except Exception as exc:
            raise RegistrationRefused(_refusal(exc)) from exc
        if live is not None and live.config_revision == revision:
            return _receipt(live, schedule, policy, at, warnings, changed=False)
        try:
            stored = rt.store.put_routine(
                candidate, now=at, expected_revision=None if live is None else live.config_revision
            )
        except StoreConflict:
            continue
        return _receipt(stored, schedule, policy, at, warnings, changed=True)
    raise StoreConflict(f"routine {spec.key} was re-registered concurrently {ATTEMPTS} times; try again")
