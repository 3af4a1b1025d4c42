"""Celery's report that the owner of runs was lost: what it does to each of them.

docs/architecture.md, section "The modules, in detail" (engine/lost.py).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from alma_schedule.errors import AlmaScheduleError, InvalidInput
from alma_schedule.model import BLOCKED_WHY, BlockedWhy, Data, RunKey, RunRecord, RunResult, RunState
from alma_schedule.policies.ownership import check_owner, lost_effect

from .runtime import Runtime

log = logging.getLogger("alma_schedule.engine")

__all__ = ["LostReport", "report_lost"]


@dataclass(frozen=True, slots=True)
class LostReport(Data):
    """What one loss report did: the runs failed (``worker_lost``), marked blocked, and left (they
    moved meanwhile, or a store error: ``errors``)."""

    request_id: str
    why: str
    failed: tuple[RunKey, ...] = ()
    blocked: tuple[RunKey, ...] = ()
    untouched: tuple[RunKey, ...] = ()
    errors: int = 0


def _one(rt: Runtime, rec: RunRecord, why: BlockedWhy, at: datetime) -> str:
    """Settle or mark one running run: ``failed``, ``blocked`` or ``untouched``."""
    routine = rt.store.get_routine(rec.scope, rec.routine_id, include_deleted=True)
    effect = lost_effect(routine.kind, routine.definition, why) if routine is not None else why
    if isinstance(effect, RunResult):
        res = rt.store.finish(rec.key, effect, now=at, timers=rt.timers, from_states={RunState.RUNNING})
        return "failed" if res.won else "untouched"
    return "blocked" if rt.store.mark_blocked(rec.key, why=effect, now=at) else "untouched"


def report_lost(rt: Runtime, request_id: str, why: str, now: datetime | None = None) -> LostReport:
    """Apply Celery's loss report for ``request_id`` (see the module docstring)."""
    check_owner(request_id, "request_id")
    if not isinstance(why, str) or why not in BLOCKED_WHY or why == BlockedWhy.UNCERTAIN_OUTCOME:
        shown = repr(why) if isinstance(why, str) and len(why) <= 40 else type(why).__name__
        raise InvalidInput(f"why must be worker_lost or time_limit, not {shown}")
    at = rt.now(now)
    done: dict[str, list[RunKey]] = {"failed": [], "blocked": [], "untouched": []}
    errors = 0
    for rec in rt.store.running_of(request_id):
        try:
            done[_one(rt, rec, BlockedWhy(why), at)].append(rec.key)
        except AlmaScheduleError as exc:
            errors += 1
            done["untouched"].append(rec.key)
            log.error("loss report %s (%s): run %s not handled: %s", request_id, why, rec.key, exc)
    report = LostReport(
        request_id, why, tuple(done["failed"]), tuple(done["blocked"]), tuple(done["untouched"]), errors
    )
    log.warning(
        "loss report %s (%s): %d run(s) failed(worker_lost), %d blocked, %d untouched",
        request_id,
        why,
        len(report.failed),
        len(report.blocked),
        len(report.untouched),
    )
    return report
