"""The tick's shapes: ``decide``'s answers, what one claim transaction did, the plan and the report."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from alma_schedule.model.data import Data
from alma_schedule.model.keys import RunKey
from alma_schedule.model.overdue import OverdueFire
from alma_schedule.model.run import RunRecord

__all__ = [
    "ClaimBatch",
    "Decision",
    "Defer",
    "Deferral",
    "Erroring",
    "Fire",
    "NotDue",
    "PlannedFire",
    "PlannedRoutine",
    "Resends",
    "TickEndAsk",
    "TickEndParts",
    "TickError",
    "TickMinute",
    "TickPlan",
    "TickReport",
    "ZoneReconciliation",
    "merge_kinds",
]


@dataclass(frozen=True, slots=True)
class Fire(Data):
    """``decide``'s answer for a due routine: claim this fire and move the index.

    docs/architecture.md, "The modules, in detail" (model/tick.py, Fire).
    """

    run_id: str
    fire_at: datetime
    expires_at: datetime
    next_due_at: datetime | None
    resend_at: datetime | None = None
    missed: bool = False
    max_runs: int | None = None
    buffer: bool = False
    due_at: datetime | None = None
    fires_missed: int = 0
    #: nominal fires since the cursor that rolled onto a day another fire runs (a business calendar):
    #: recorded ``skipped(calendar)`` beside this claim, each under the run id of its own instant
    collided: tuple[datetime, ...] = ()


@dataclass(frozen=True, slots=True)
class NotDue(Data):
    """``decide``'s answer when nothing is due after all (a stale index): just move it."""

    next_due_at: datetime | None


@dataclass(frozen=True, slots=True)
class Defer(Data):
    """``decide``'s answer for a routine that cannot be planned: back off until ``until``."""

    until: datetime
    error: str


Decision = Fire | NotDue | Defer


@dataclass(frozen=True, slots=True)
class Deferral(Data):
    """A routine deferred by one ``claim_due`` (one entry in the tick's ``errors``)."""

    org: str
    uid: str
    routine_id: str
    until: datetime
    error: str
    first: bool = True  # the first deferral of a streak (reported once, then backed off)


@dataclass(frozen=True, slots=True)
class Erroring(Data):
    """The routines that carry a planning error: a few of them, earliest next attempt
    (``Deferral.until``) first, and how many there are in all."""

    routines: tuple[Deferral, ...] = ()
    count: int = 0


@dataclass(frozen=True, slots=True)
class ClaimBatch(Data):
    """What one ``claim_due`` transaction did. ``buffered``: fires recorded ``buffered`` behind the
    routine's active run (overlap ``latest``); a buffered row they replaced is in ``skipped``.
    ``fires_missed``: the fires its cursor moves collapsed (counted on their routines), by routine
    kind, sorted; empty when none."""

    claimed: tuple[RunRecord, ...] = ()
    skipped: tuple[RunRecord, ...] = ()
    deferred: tuple[Deferral, ...] = ()
    buffered: tuple[RunRecord, ...] = ()
    fires_missed: tuple[tuple[str, int], ...] = ()

    def __add__(self, other: ClaimBatch) -> ClaimBatch:
        """Both batches' outcomes, this one's first (a batch and the held rows' claim after it)."""
        return ClaimBatch(
            self.claimed + other.claimed,
            self.skipped + other.skipped,
            self.deferred + other.deferred,
            self.buffered + other.buffered,
            merge_kinds(self.fires_missed, other.fires_missed),
        )


def merge_kinds(*counts: Iterable[tuple[str, int]] | Mapping[str, int]) -> tuple[tuple[str, int], ...]:
    """Counts by kind (pairs, or a mapping) added up, sorted by kind (no zero entries)."""
    total: dict[str, int] = {}
    for pairs in counts:
        for kind, n in pairs.items() if isinstance(pairs, Mapping) else pairs:
            total[kind] = total.get(kind, 0) + n
    return tuple(sorted((k, n) for k, n in total.items() if n))


@dataclass(frozen=True, slots=True)
class Resends(Data):
    """What one ``take_resends`` did: rows to send again, rows expired to ``skipped(missed)``."""

    resend: tuple[RunRecord, ...] = ()
    expired: tuple[RunRecord, ...] = ()


@dataclass(frozen=True, slots=True)
class PlannedFire(Data):
    org: str
    uid: str
    routine_id: str
    run_id: str
    fire_at: datetime
    action: str  # "claim" | "skip:missed" | "defer" | "not_due"
    why: str = ""
    due_at: datetime | None = None  # fire_at + its jitter (the instant the fire came due)
    #: The fires this claim would collapse (counted on the routine; ``policies.missed``).
    fires_missed: int = 0


@dataclass(frozen=True, slots=True)
class PlannedRoutine(Data):
    org: str
    uid: str
    routine_id: str
    why: str


@dataclass(frozen=True, slots=True)
class TickPlan(Data):
    """What a tick at ``at`` would do; read-only. Poll entries carry ``collect_run_id``."""

    at: datetime
    due: tuple[PlannedFire, ...] = ()
    resends: tuple[RunKey, ...] = ()
    expiring: tuple[RunKey, ...] = ()
    polls: tuple[dict[str, str], ...] = ()
    skipped: tuple[PlannedRoutine, ...] = ()
    inactive: tuple[PlannedRoutine, ...] = ()
    blocked: tuple[RunKey, ...] = ()
    errors: tuple[TickError, ...] = ()
    erroring_count: int = 0
    next_wake_at: datetime | None = None
    #: Why each run of ``blocked`` waits (same order): ``policies.blocked.blocked_why``.
    blocked_why: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class TickError(Data):
    """One error of a tick: a routine that cannot be planned (``routine`` = its key, ``until`` =
    its next attempt), or a step of the tick (``<dispatcher>``, ``<maintenance>``)."""

    routine: str
    error: str
    until: datetime | None = None


@dataclass(frozen=True, slots=True)
class TickReport(Data):
    """The tick's small report. ``to_dict()`` is counts plus a few ids (Flower shows it as text)."""

    at: datetime
    claimed: tuple[RunKey, ...] = ()
    resent: tuple[RunKey, ...] = ()
    collect: tuple[RunKey, ...] = ()
    skipped: tuple[RunKey, ...] = ()
    blocked: tuple[RunKey, ...] = ()
    errors: tuple[TickError, ...] = ()
    expired: tuple[RunKey, ...] = ()
    sends_paused: bool = False
    erroring_count: int = 0
    next_wake_at: datetime | None = None
    #: Why each run of ``blocked`` waits (same order): ``policies.blocked.blocked_why``.
    blocked_why: tuple[str, ...] = ()
    buffered: tuple[RunKey, ...] = ()
    #: How many fires of each routine kind the tick claimed (the worker exporter's label).
    claimed_kinds: tuple[tuple[str, int], ...] = ()
    #: How many fires of each routine kind the tick's claims collapsed (no row; counted on their
    #: routines: ``routines.fires_missed``), the worker exporter's ``alma_fires_missed_total{kind}``.
    missed_kinds: tuple[tuple[str, int], ...] = ()
    #: The overdue fires (a schedule's ``expect``: policies.overdue), named on every tick while they last.
    overdue: tuple[OverdueFire, ...] = ()
    #: Terminal runs the tick's maintenance deleted (``run_retention``; at most ``claim_limit``), the
    #: worker exporter's ``alma_runs_pruned_total``.
    runs_pruned: int = 0
    #: Warnings that are no error: a business calendar that runs out within a year (engine/calendars.py).
    warnings: tuple[str, ...] = ()

    @property
    def fires_missed(self) -> int:
        """The fires this tick's claims collapsed, every kind (a claim counts at most 10,000)."""
        return sum(n for _, n in self.missed_kinds)

    SAMPLE = 5

    def to_dict(self) -> dict[str, Any]:
        n = self.SAMPLE
        return {
            "at": self.at.isoformat(),
            "claimed": len(self.claimed),
            "resent": len(self.resent),
            "collect": len(self.collect),
            "skipped": len(self.skipped) + len(self.expired),
            "blocked": len(self.blocked),
            "errors": len(self.errors),
            "erroring": self.erroring_count,
            "sends_paused": self.sends_paused,
            "next_wake_at": None if self.next_wake_at is None else self.next_wake_at.isoformat(),
            "buffered": len(self.buffered),
            "fires_missed": self.fires_missed,
            "overdue": len(self.overdue),
            "runs_pruned": self.runs_pruned,
            "warnings": list(self.warnings),
            "ids": {
                "claimed": [str(k) for k in self.claimed[:n]],
                "skipped": [str(k) for k in (self.skipped + self.expired)[:n]],
                "blocked": [str(k) for k in self.blocked[:n]],
                "blocked_why": list(self.blocked_why[:n]),
                "overdue": [f.key for f in self.overdue[:n]],
                "errors": [e.to_dict() for e in self.errors[:n]],
            },
        }


@dataclass(frozen=True, slots=True)
class ZoneReconciliation(Data):
    """What one page of ``Store.reconcile_zone_data`` did: the zone data recorded before it
    (``previous``), how many routines' next fire moved, and whether the store now records
    ``zone_data`` (``done``: nothing is left to re-derive)."""

    zone_data: str
    previous: str | None
    changed: int = 0
    done: bool = True


@dataclass(frozen=True, slots=True)
class TickProbe(Data):
    """What ``Store.probe_tick`` saw at ``now``: for each step of the tick, whether it has anything
    to do (each flag is the ``EXISTS`` of that step's own predicate). The tick skips a step whose
    flag is false; a row that becomes eligible after the probe is caught by the next tick."""

    due: bool = True  #: ``claim_due`` would lock a routine
    backfills: bool = True  #: a backfill is pending (``claim_backfills`` goes past its first read)
    resends: bool = True  #: ``take_resends`` would take a claimed run (live, ``resend_at <= now``)
    expiries: bool = True  #: ``take_resends`` would expire a claimed or buffered run
    polls: bool = True  #: ``take_polls`` would take a submitted run
    expired_results: bool = True  #: ``erase_expired_results`` would erase a result text
    purge: bool = True  #: ``purge_deleted`` would remove a tombstoned routine
    blocked: bool = True  #: ``blocked`` would list a run
    erroring: bool = True  #: ``erroring`` would list a routine


@dataclass(frozen=True, slots=True)
class TickEndAsk(Data):
    """The end of a tick, as asked of ``Store.begin_tick_end``: ``record_tick(now, claimed, lag_p50,
    lag_p95)``; ``erroring(erroring_limit)`` unless that is None; ``blocked(now, run_time_limit)``
    unless that is None."""

    now: datetime
    claimed: int
    lag_p50: float | None
    lag_p95: float | None
    erroring_limit: int | None = None
    run_time_limit: timedelta | None = None


@dataclass(frozen=True, slots=True)
class TickEndParts(Data):
    """What ``Store.begin_tick_end`` obtained: each part None when it did not (the caller asks for it
    with the part's own method); ``heartbeat_failed``: a heartbeat write that may have committed.

    docs/architecture.md, "The modules, in detail" (model/tick.py, TickEndParts).
    """

    heartbeat: tuple[datetime | None] | None = None
    erroring: Erroring | None = None
    blocked: tuple[RunRecord, ...] | None = None
    heartbeat_failed: str | None = None


# --- the tick log (the dashboard's clock health) ---
#: How long the tick log keeps a minute (older rows are pruned by the tick that logs).
TICK_LOG_KEEP_DAYS = 7
#: The most minutes older than that one tick prunes (the oldest first): one a minute in a steady log; a
#: log whose clock stood still for longer catches up over the next ticks (each prune bounded, by key).
TICK_LOG_PRUNE_LIMIT = 1000


@dataclass(frozen=True, slots=True)
class TickMinute(Data):
    """One minute of the tick log: how many ticks ran in it, how many fires they claimed, and the
    fire lag (claim instant minus due instant, seconds) of those fires: p50 and p95 of the tick
    that logged them (the larger one when several ticks share the minute); None without a fire."""

    minute: datetime
    ticks: int
    claimed: int
    lag_p50: float | None = None
    lag_p95: float | None = None


# --- end the tick log ---
