"""A run: its states (the state table of ``docs/architecture.md``), its row, and the edges it may take.

Nothing moves backwards. :data:`EDGES` is the guarded graph the stores enforce by compare-and-set;
the operator's ``record`` may move any non-terminal state to a terminal one.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from alma_schedule.model.data import Data
from alma_schedule.model.keys import RunKey, Scope, trusted

__all__ = [
    "ACTIVE",
    "ANNOTATABLE",
    "BLOCKED_WHY",
    "EDGES",
    "NON_TERMINAL",
    "TERMINAL",
    "WAITING",
    "BlockedWhy",
    "RunRecord",
    "RunState",
]


class RunState(enum.StrEnum):
    """A run row's state (the state table of docs/architecture.md). Nothing moves backwards."""

    CLAIMED = "claimed"
    RUNNING = "running"
    SUBMITTED = "submitted"
    COLLECTING = "collecting"
    COMPLETED = "completed"
    FAILED = "failed"
    REFUSED = "refused"
    SKIPPED = "skipped"
    TIMED_OUT = "timed_out"
    #: A fire that came due during an active run of an ``overlap: latest`` routine: it waits, at
    #: most one per routine, outside the one-open-run index, and is released (``claimed``) by the
    #: transaction that ends the active run. Non-terminal, but not in :data:`NON_TERMINAL`.
    BUFFERED = "buffered"


#: The states of the routine's ONE open run (the one-open-run partial unique index): a ``buffered``
#: row is non-terminal too, but waits outside it (see :data:`WAITING`).
NON_TERMINAL: frozenset[str] = frozenset({RunState.CLAIMED, RunState.RUNNING, RunState.SUBMITTED, RunState.COLLECTING})
TERMINAL: frozenset[str] = frozenset(
    {RunState.COMPLETED, RunState.FAILED, RunState.REFUSED, RunState.SKIPPED, RunState.TIMED_OUT}
)
#: Non-terminal states outside the one-open-run index: the routine's one ``buffered`` fire.
WAITING: frozenset[str] = frozenset({RunState.BUFFERED})
#: States that make a newer fire ``skipped(overlap)`` (a claimed MANUAL run blocks as well).
ACTIVE: frozenset[str] = frozenset({RunState.RUNNING, RunState.SUBMITTED, RunState.COLLECTING})

#: The guarded edges of the state graph: target state -> states it may be entered from by its
#: ordinary writer. The operator's ``record`` may move ANY non-terminal state to a terminal one.
EDGES: Mapping[str, frozenset[str]] = {
    RunState.CLAIMED: frozenset({RunState.BUFFERED}),  # released when the active run ends
    RunState.RUNNING: frozenset({RunState.CLAIMED}),
    RunState.SUBMITTED: frozenset({RunState.RUNNING}),
    RunState.COLLECTING: frozenset({RunState.SUBMITTED}),
    RunState.COMPLETED: frozenset({RunState.RUNNING, RunState.COLLECTING}),
    RunState.FAILED: frozenset({RunState.RUNNING, RunState.SUBMITTED, RunState.COLLECTING}),
    RunState.REFUSED: frozenset({RunState.RUNNING}),
    RunState.SKIPPED: frozenset({RunState.CLAIMED, RunState.BUFFERED}),
    RunState.TIMED_OUT: frozenset({RunState.SUBMITTED}),
}


# --- the blocked marker: a `running` run blocked at once -------------------------------


class BlockedWhy(enum.StrEnum):
    """Why a ``running`` run is marked blocked at once (``runs.blocked_why``; a closed list).

    The marker never changes the state: the run stays ``running`` (age proves nothing; only the
    operator's ``record`` ends it) and is listed at once by every tick's ``blocked`` and by
    ``runs stuck``. The first marker wins.
    """

    #: The provider call may have reached the provider (reset, 5xx, 408, timeout, a time limit):
    #: the cost is its whole reserved bound until the operator records the real one.
    UNCERTAIN_OUTCOME = "uncertain_outcome"
    #: Celery reported the run's owner lost (``WorkerLostError``).
    WORKER_LOST = "worker_lost"
    #: Celery reported the run's owner past its hard time limit (``TimeLimitExceeded``).
    TIME_LIMIT = "time_limit"


BLOCKED_WHY: frozenset[str] = frozenset(BlockedWhy)

# --- end the blocked marker ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RunRecord(Data):
    """One run row: the claim and the ledger entry of one fire."""

    org: str
    uid: str
    routine_id: str
    run_id: str
    state: str
    origin: str
    config_revision: str
    fire_at: datetime
    claimed_at: datetime
    state_at: datetime
    expires_at: datetime
    reason: str | None = None
    started_at: datetime | None = None
    submitted_at: datetime | None = None
    finished_at: datetime | None = None
    resend_at: datetime | None = None
    send_attempts: int = 0
    next_poll_at: datetime | None = None
    poll_attempts: int = 0
    deadline: datetime | None = None
    target_task_id: str | None = None
    error_class: str | None = None
    reserved_micros: int = 0
    reserve_day: str | None = None
    reserve_ceilings: tuple[str, ...] = ()
    cost_micros: int = 0
    caps_crossed: tuple[str, ...] = ()
    session_id: str | None = None
    turn_id: str | None = None
    batch_id: str | None = None
    delivery_hash: str | None = None
    result_text: str | None = None
    erase_at: datetime | None = None
    blocked_at: datetime | None = None
    blocked_why: str | None = None
    #: Who took ``claimed -> running``: the Celery request id of the ``run`` message, or
    #: ``<request id>/<org>/<uid>/<routine_id>/<run_id>`` for a fire packed in ``run_many``
    #: (:func:`alma_schedule.policies.ownership.owner_of`); None when started outside Celery.
    owner: str | None = None
    # --- jitter: when the fire came due (fire_at + its jitter); NULL on 0.1.0 rows ---
    due_at: datetime | None = None

    @property
    def key(self) -> RunKey:
        return trusted(RunKey, self.org, self.uid, self.routine_id, self.run_id)

    @property
    def scope(self) -> Scope:
        return trusted(Scope, self.org, self.uid)

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL

    @property
    def lag(self) -> timedelta | None:
        """How late the run started: ``started_at - due_at`` (``fire_at`` on a row without
        ``due_at``); None before it started. With jitter, the delay the jitter chose is not lag."""
        if self.started_at is None:
            return None
        return self.started_at - (self.due_at if self.due_at is not None else self.fire_at)


#: Fields ``annotate`` may write (never the state).
ANNOTATABLE: frozenset[str] = frozenset(
    {
        "session_id",
        "turn_id",
        "batch_id",
        "target_task_id",
        "caps_crossed",
        "delivery_hash",
        "result_text",
        "erase_at",
        "cost_micros",
    }
)
