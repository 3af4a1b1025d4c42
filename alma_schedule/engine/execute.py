"""What a run message, a collect message and an operator's reconciliation do.

docs/architecture.md, section "The modules, in detail" (engine/execute.py).
"""

from __future__ import annotations

import logging
from datetime import datetime

from alma_schedule.errors import InvalidInput, NotFound, OutcomeUncertain, StoreError
from alma_schedule.model import (
    REASONS,
    TERMINAL,
    BlockedWhy,
    ClaimResult,
    Collects,
    Reason,
    Routine,
    RunKey,
    RunRecord,
    RunResult,
    RunState,
    Scope,
    TellsLate,
    check_scope,
)
from alma_schedule.policies.audit import check_actor
from alma_schedule.policies.deadline import timed_out

from .handle import StoreRunHandle
from .retry import Sleep, as_owner, finish_as_owner, start_as_owner
from .runtime import Runtime, UnknownKind

log = logging.getLogger("alma_schedule.engine")

__all__ = ["collect", "execute", "record", "send_released"]

#: The owner's part of a finish: the run's start instant and the injected sleep (None: no retry).
_Owner = tuple[datetime, Sleep | None]

_RUNNER_OUTCOMES = frozenset({RunState.COMPLETED, RunState.FAILED, RunState.REFUSED, RunState.SUBMITTED})
_DEFAULT_REASON: dict[str, str] = {
    RunState.COMPLETED: Reason.OK,
    RunState.FAILED: Reason.RUNNER_ERROR,
    RunState.TIMED_OUT: Reason.DEADLINE_PASSED,
}


def _checked(result: object, *, allowed: frozenset[str]) -> RunResult:
    """The runner's answer, or ``failed(runner_error, InvalidRunResult)`` when it is not a usable one."""
    if not isinstance(result, RunResult) or result.outcome not in allowed:
        log.error("runner returned an invalid result: %r", result)
        return RunResult.failed(Reason.RUNNER_ERROR, error_class="InvalidRunResult")
    if result.outcome == RunState.SUBMITTED:
        return result
    reason = result.reason or _DEFAULT_REASON.get(result.outcome)
    if reason not in REASONS:
        log.error("runner returned an unknown reason code: %r", result.reason)
        return RunResult.failed(Reason.RUNNER_ERROR, result.cost_micros, "InvalidRunResult")
    if reason != result.reason:
        return RunResult(result.outcome, reason, result.cost_micros, result.error_class)
    return result


def send_released(rt: Runtime, res: ClaimResult) -> None:
    """Send the buffered fire the store released with ``res`` (after its commit), if any. Never
    raises: a failed send leaves a ``claimed`` row that a tick re-sends (``resend_at``)."""
    released = res.released
    if released is None:
        return
    try:
        rt.dispatcher.send_runs([released])
    except Exception as exc:
        log.warning("sending the released buffered fire %s failed (%s): a tick re-sends it", released.key, exc)


def _finish(
    rt: Runtime, key: RunKey, result: RunResult, now: datetime, owned: str | None, owner: _Owner | None = None
) -> RunRecord:
    """Finish from the state the caller owns (``owned``; None for a collector that owns nothing yet:
    then only from ``submitted``, the state it read). ``owner``: the run's start instant and the
    sleep of its owner, who retries while the store is unreachable (:mod:`.retry`)."""
    from_states = {owned or RunState.SUBMITTED}
    if owner is None:
        res = rt.store.finish(key, result, now=now, timers=rt.timers, from_states=from_states)
    else:
        started, sleep = owner
        res = finish_as_owner(rt, key, result, now=now, started=started, from_states=from_states, sleep=sleep)
    send_released(rt, res)
    if res.record is None:
        raise NotFound.of("run", key)
    if not res.won:
        log.info("finish %s as %s lost (%s): the run is %s", key, result.outcome, res.reason, res.record.state)
    return res.record


def _runner_failure(key: RunKey, exc: Exception, what: str) -> RunResult:
    log.error("runner %s of %s raised %s", what, key, type(exc).__name__, exc_info=exc)
    return RunResult.failed(Reason.RUNNER_ERROR, error_class=type(exc).__name__)


def _uncertain(
    rt: Runtime, handle: StoreRunHandle, exc: OutcomeUncertain, what: str, at: datetime, owner: _Owner
) -> RunRecord:
    """Leave the run as the store has it (no finish: its reservation stays held), mark a ``running``
    run blocked at once (``uncertain_outcome``, its cost raised to at least its reservation), and
    return it. ``owner``: the caller's start instant and sleep; the marker is the owner's write, so it
    is retried while the store is unreachable, as a finish is (:func:`.retry.as_owner`, until the soft
    time limit): an uncertain outcome met in an outage is then listed by ``runs stuck`` at once."""
    key = handle.key
    log.error(
        "runner %s of %s: outcome uncertain (%s, from %s); the run is blocked, left for the operator's record",
        what,
        key,
        exc,
        type(exc.__cause__).__name__ if exc.__cause__ is not None else "-",
        exc_info=exc,
    )
    floor = handle.record.reserved_micros or None
    started, sleep = owner

    def mark() -> bool:
        return rt.store.mark_blocked(key, why=BlockedWhy.UNCERTAIN_OUTCOME, now=at, cost_micros=floor)

    try:
        as_owner(rt, f"{what} {key}: the blocked marker", mark, started=started, sleep=sleep)
    except StoreError:  # still away at the soft time limit: the last record seen (the age rule lists it)
        log.error("run %s: the blocked marker was not written (store error); runs stuck lists it by age", key)
        return handle.record
    try:
        return handle.result()
    except StoreError:
        log.error("run %s: blocked; its row could not be read back (store error)", key)
        return handle.record


def _later(rt: Runtime, start: datetime, given: datetime | None) -> datetime:
    """The instant to finish at: the given one, or the clock now (never before ``start``)."""
    return start if given is not None else max(start, rt.now(None))


def execute(
    rt: Runtime, key: RunKey, now: datetime | None = None, owner: str | None = None, sleep: Sleep | None = None
) -> RunRecord:
    """Run one fire at most once. Returns the run's record after this call (a loser's is the winner's).

    ``owner`` is written by the start CAS (:mod:`alma_schedule.policies.ownership`); with ``sleep``
    the owner retries its finish while the store is unreachable (:mod:`.retry`)."""
    at = rt.now(now)
    # the start CAS is the only read: a loser (not claimed, past its window, routine inactive) gets
    # the current record; a winner gets the routine its CAS joined
    started = start_as_owner(rt, key, now=at, owner=owner, sleep=sleep)
    send_released(rt, started)  # a paused / disabled / deleted routine: its buffered fire meets it too
    if started.record is None:
        raise NotFound.of("run", key)
    if not started.won:
        if started.reason == "expired":  # a late message: never run a fire past its window
            log.warning("run %s not started: its window closed at %s", key, started.record.expires_at.isoformat())
        else:
            log.info("run %s not started: %s (%s)", key, started.reason, started.record.state)
        return started.record
    record = started.record
    mine: _Owner = (at, sleep)
    routine = started.routine
    if routine is None:  # a start settled by reading the row (or a store that did not join it): read it
        routine = as_owner(
            rt,
            f"run {key}: reading its routine",
            lambda: rt.store.get_routine(key.scope, key.routine_id, include_deleted=True),
            started=at,
            sleep=sleep,
        )
    if routine is None:  # purged under us: cannot happen while the run is non-terminal, but never hang
        gone = RunResult.failed(Reason.UNKNOWN_KIND, error_class="RoutineGone")
        return _finish(rt, key, gone, at, RunState.RUNNING, mine)
    try:
        runner = rt.resolve(routine)
    except UnknownKind as exc:
        log.error("run %s: %s", key, exc, exc_info=exc.__cause__)
        unknown = RunResult.failed(Reason.UNKNOWN_KIND, error_class=exc.cause)
        return _finish(rt, key, unknown, at, RunState.RUNNING, mine)
    handle = StoreRunHandle(rt, record, routine, at, owned=RunState.RUNNING)
    try:
        result = _checked(runner.run(routine, handle), allowed=_RUNNER_OUTCOMES)
    except OutcomeUncertain as exc:
        return _uncertain(rt, handle, exc, "run", _later(rt, at, now), mine)
    except Exception as exc:
        result = _runner_failure(key, exc, "run")
    if result.outcome == RunState.SUBMITTED:
        current = handle.result()
        if current.state != RunState.RUNNING:  # submitted (or already collected / recorded)
            return current
        log.error("run %s: the runner answered submitted without submitting", key)
        result = RunResult.failed(Reason.RUNNER_ERROR, error_class="NotSubmitted")
    return _finish(rt, key, result, _later(rt, at, now), handle.owned_state, mine)


def collect(
    rt: Runtime, key: RunKey, now: datetime | None = None, owner: str | None = None, sleep: Sleep | None = None
) -> RunRecord:
    """Poll one submitted run (``key.run_id`` is the ``collect_run_id``). Writes nothing while pending.

    ``owner`` (the collector's Celery request id) is written by the collecting CAS; with ``sleep`` a
    collecting CAS whose answer was lost is settled by the row, and the collector that won
    ``collecting`` retries its finish while the store is unreachable (:mod:`.retry`)."""
    at = rt.now(now)
    record = rt.store.get(key)
    if record is None:
        raise NotFound.of("run", key)
    if record.state != RunState.SUBMITTED:
        return record
    routine = rt.store.get_routine(key.scope, key.routine_id, include_deleted=True)
    if timed_out(record.deadline, at, rt.settings.clock_tolerance):
        _log_late(rt, record, routine)
        return _finish(rt, key, RunResult.timed_out("deadline_passed"), at, None)
    if routine is None:
        gone = RunResult.failed("config_revision_changed", error_class="RoutineGone")
        return _finish(rt, key, gone, at, None)
    try:
        runner = rt.resolve(routine)
    except UnknownKind as exc:
        log.error("collect %s: %s", key, exc, exc_info=exc.__cause__)
        return _finish(rt, key, RunResult.failed(Reason.UNKNOWN_KIND, error_class=exc.cause), at, None)
    if not isinstance(runner, Collects):
        log.error("collect %s: the runner of kind %r cannot collect", key, routine.kind)
        return _finish(rt, key, RunResult.failed(Reason.RUNNER_ERROR, error_class="NoCollect"), at, None)
    handle = StoreRunHandle(rt, record, routine, at, owner=owner, sleep=sleep)
    try:
        allowed = _RUNNER_OUTCOMES - {RunState.REFUSED} | {RunState.TIMED_OUT}
        result = _checked(runner.collect(routine, handle), allowed=allowed)
    except OutcomeUncertain as exc:
        return _uncertain(rt, handle, exc, "collect", _later(rt, at, now), (at, sleep))
    except Exception as exc:
        result = _runner_failure(key, exc, "collect")
    if result.outcome == RunState.SUBMITTED:
        return handle.result()
    if result.outcome == RunState.COMPLETED and handle.config_changed:
        log.error("collect %s: routine revision changed but the runner completed; recorded as failed", key)
        result = RunResult.failed("config_revision_changed", result.cost_micros, result.error_class)
    if result.outcome == RunState.COMPLETED and handle.record.state == RunState.SUBMITTED:
        # A runner with nothing to deliver may skip the CAS; take it here so one caller finishes.
        if not handle.begin_collecting():
            return handle.result()
    mine: _Owner | None = (at, sleep) if handle.owned_state == RunState.COLLECTING else None
    return _finish(rt, key, result, _later(rt, at, now), handle.owned_state, mine)


def _log_late(rt: Runtime, record: RunRecord, routine: Routine | None) -> None:
    """Log the target's state at the timeout, when the runner can tell (``late_result``)."""
    teller: TellsLate | None = None
    if routine is not None:
        try:
            runner = rt.resolve(routine)
        except UnknownKind:
            runner = None
        teller = runner if isinstance(runner, TellsLate) else None
    try:
        state = teller.late_result(record) if teller is not None else None
    except Exception as exc:  # a log line only: the timeout stands
        state = f"unknown ({type(exc).__name__})"
    log.warning(
        "collect %s: timed out past its deadline %s; %s",
        record.key,
        record.deadline,
        state or "nothing to say of its target",
    )


def record(
    rt: Runtime,
    scope: Scope,
    routine_id: str,
    run_id: str,
    outcome: str,
    reason: str,
    now: datetime | None = None,
    *,
    cost_micros: int | None = None,
    actor: str | None = None,
) -> ClaimResult:
    """The operator's reconciliation: CAS any non-terminal run to ``outcome(reason)``, settled at the
    recorded cost (``cost_micros``, else the run's stored cost). Never resends the recorded run; the
    buffered fire its end releases is sent (:func:`send_released`)."""
    key = RunKey.of(check_scope(scope), routine_id, run_id)  # validated when built
    if not isinstance(outcome, str) or outcome not in TERMINAL:
        raise InvalidInput(f"outcome {outcome!r} is not a terminal state ({', '.join(sorted(TERMINAL))})")
    if not isinstance(reason, str) or reason not in REASONS:
        raise InvalidInput(f"reason {reason!r} is not a known reason code (one of: {', '.join(sorted(REASONS))})")
    actor = check_actor(actor)
    res = rt.store.record(key, outcome, reason, now=rt.now(now), cost_micros=cost_micros, actor=actor)
    send_released(rt, res)
    return res
