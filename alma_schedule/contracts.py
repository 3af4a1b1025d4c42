"""The shared vocabulary: run states, reason codes, task and queue names, and the shapes passed around.

Everything here is plain data (frozen dataclasses with ``to_dict()``) or a Protocol. The run state
table of DESIGN.md is encoded in :data:`EDGES`; stores enforce it by compare-and-set.
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from datetime import date, datetime, timedelta
from typing import Any, Protocol, runtime_checkable

# --------------------------------------------------------------------------- names

TICK_TASK = "alma_schedule.tick"
RUN_TASK = "alma_schedule.run"
COLLECT_TASK = "alma_schedule.collect"
#: Several claimed fires in one message (each started on its own just before it runs).
RUN_MANY_TASK = "alma_schedule.run_many"

TICK_QUEUE = "alma.tick"
RUN_QUEUE = "alma.run"
COLLECT_QUEUE = "alma.collect"

MANUAL_PREFIX = "manual:"


class RunState(enum.StrEnum):
    """A run row's state (DESIGN.md's table). Nothing moves backwards."""

    CLAIMED = "claimed"
    RUNNING = "running"
    SUBMITTED = "submitted"
    COLLECTING = "collecting"
    COMPLETED = "completed"
    FAILED = "failed"
    REFUSED = "refused"
    SKIPPED = "skipped"
    TIMED_OUT = "timed_out"


class Origin(enum.StrEnum):
    """Who created the run: the tick (``schedule``) or ``trigger`` (``manual``)."""

    SCHEDULE = "schedule"
    MANUAL = "manual"


NON_TERMINAL: frozenset[str] = frozenset({"claimed", "running", "submitted", "collecting"})
TERMINAL: frozenset[str] = frozenset({"completed", "failed", "refused", "skipped", "timed_out"})
#: States that make a newer fire ``skipped(overlap)`` (a claimed MANUAL run blocks as well).
ACTIVE: frozenset[str] = frozenset({"running", "submitted", "collecting"})

#: The guarded edges of the state graph: target state -> states it may be entered from by its
#: ordinary writer. The operator's ``record`` may move ANY non-terminal state to a terminal one.
EDGES: Mapping[str, frozenset[str]] = {
    "running": frozenset({"claimed"}),
    "submitted": frozenset({"running"}),
    "collecting": frozenset({"submitted"}),
    "completed": frozenset({"running", "collecting"}),
    "failed": frozenset({"running", "submitted", "collecting"}),
    "refused": frozenset({"running"}),
    "skipped": frozenset({"claimed"}),
    "timed_out": frozenset({"submitted"}),
}


class Reason(enum.StrEnum):
    """The closed set of reason codes the ledger may hold. Raw errors never reach it."""

    # completed
    OK = "ok"
    DELIVERED = "delivered"
    SUPPRESSED_DUPLICATE = "suppressed_duplicate"
    SENT = "sent"
    ERASED = "erased"  # an erasure won over a pending delivery (nothing delivered)
    # skipped
    OVERLAP = "overlap"
    MISSED = "missed"
    PAUSED = "paused"
    DISABLED = "disabled"
    DELETED = "deleted"
    # failed
    RUNNER_ERROR = "runner_error"
    PROVIDER_ERROR = "provider_error"
    PROVIDER_TIMEOUT = "provider_timeout"
    PROVIDER_GONE = "provider_gone"
    PROVIDER_EXPIRED = "provider_expired"
    PROVIDER_FAILED = "provider_failed"
    SINK_ERROR = "sink_error"
    CONFIG_REVISION_CHANGED = "config_revision_changed"
    TASK_FAILED = "task_failed"
    TASK_REVOKED = "task_revoked"
    UNKNOWN_KIND = "unknown_kind"
    # refused
    NOT_ADMITTED = "not_admitted"
    ROUTING_UNAVAILABLE = "routing_unavailable"
    CAP_EXCEEDED = "cap_exceeded"
    CEILING_REACHED = "ceiling_reached"
    # timed_out
    DEADLINE_PASSED = "deadline_passed"
    # operator
    RECONCILED = "reconciled"
    OPERATOR = "operator"


REASONS: frozenset[str] = frozenset(r.value for r in Reason)

#: ClaimResult.reason values.
CLAIM_REASONS: frozenset[str] = frozenset(
    {"won", "duplicate", "overlap", "superseded", "deleted", "disabled", "paused", "not_found"}
)


def _plain(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, enum.Enum):
        return value.value
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, frozenset, set)):
        return [_plain(v) for v in value]
    return value


class _Data:
    """Mixin: ``to_dict()`` gives JSON-ready values (ISO datetimes, plain lists)."""

    def to_dict(self) -> dict[str, Any]:
        return {f.name: _plain(getattr(self, f.name)) for f in fields(self)}  # type: ignore[arg-type]


# --------------------------------------------------------------------------- keys


@dataclass(frozen=True, slots=True)
class Scope(_Data):
    """A tenant scope ``(org, uid)``. Every tenant-facing operation takes one."""

    org: str
    uid: str

    def __str__(self) -> str:
        return f"{self.org}/{self.uid}"

    @classmethod
    def parse(cls, text: str) -> Scope:
        """Parse ``ORG/UID`` (the CLI's positional form); validation is :func:`alma_schedule.ids.check_scope`."""
        from alma_schedule.ids import check_scope

        org, sep, uid = text.partition("/")
        if not sep:
            from alma_schedule.errors import InvalidInput

            raise InvalidInput(f"scope {text!r} must be ORG/UID")
        return check_scope(cls(org, uid))


@dataclass(frozen=True, slots=True)
class RoutineKey(_Data):
    org: str
    uid: str
    routine_id: str

    @property
    def scope(self) -> Scope:
        return Scope(self.org, self.uid)

    def __str__(self) -> str:
        return f"{self.org}/{self.uid}/{self.routine_id}"


@dataclass(frozen=True, slots=True)
class RunKey(_Data):
    """One fire: ``(org, uid, routine_id, run_id)``. ``run_id`` is ``fire_id(instant)`` or ``manual:<ULID>``."""

    org: str
    uid: str
    routine_id: str
    run_id: str

    @property
    def scope(self) -> Scope:
        return Scope(self.org, self.uid)

    @property
    def routine_key(self) -> RoutineKey:
        return RoutineKey(self.org, self.uid, self.routine_id)

    def args(self) -> list[str]:
        """The positional arguments of the run / collect task message."""
        return [self.org, self.uid, self.routine_id, self.run_id]

    def __str__(self) -> str:
        return f"{self.org}/{self.uid}/{self.routine_id}/{self.run_id}"


# --------------------------------------------------------------------------- rows


@dataclass(frozen=True, slots=True)
class RoutineSpec(_Data):
    """What a tenant registers: the input of ``Schedule.register``."""

    org: str
    uid: str
    routine_id: str
    kind: str
    schedule: Mapping[str, Any]
    definition: Mapping[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> RoutineKey:
        return RoutineKey(self.org, self.uid, self.routine_id)

    @property
    def scope(self) -> Scope:
        return Scope(self.org, self.uid)


@dataclass(frozen=True, slots=True)
class Routine(_Data):
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

    @property
    def key(self) -> RoutineKey:
        return RoutineKey(self.org, self.uid, self.routine_id)

    @property
    def scope(self) -> Scope:
        return Scope(self.org, self.uid)

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
class RoutineVersion(_Data):
    """One entry of a routine's immutable version history."""

    org: str
    uid: str
    routine_id: str
    config_revision: str
    kind: str
    schedule: Mapping[str, Any]
    definition: Mapping[str, Any]
    created_at: datetime


@dataclass(frozen=True, slots=True)
class RunRecord(_Data):
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

    @property
    def key(self) -> RunKey:
        return RunKey(self.org, self.uid, self.routine_id, self.run_id)

    @property
    def scope(self) -> Scope:
        return Scope(self.org, self.uid)

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL


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


# --------------------------------------------------------------------------- results


@dataclass(frozen=True, slots=True)
class RunResult(_Data):
    """What a runner returns. Only the engine writes the terminal state it implies.

    ``outcome`` is ``completed``, ``failed``, ``refused`` or ``submitted`` (``submitted`` only
    acknowledges what the handle already wrote). The engine may also finish ``timed_out`` and
    ``skipped`` itself. ``cost_micros`` is integer micro-USD; ``error_class`` is the exception
    class name of a failure, kept apart from the closed ``reason``.
    """

    outcome: str
    reason: str | None = None
    cost_micros: int | None = None
    error_class: str | None = None

    @classmethod
    def completed(cls, reason: str = "ok", cost_micros: int | None = None) -> RunResult:
        return cls("completed", reason, cost_micros)

    @classmethod
    def failed(
        cls, reason: str, cost_micros: int | None = None, error_class: str | None = None
    ) -> RunResult:
        return cls("failed", reason, cost_micros, error_class)

    @classmethod
    def refused(cls, reason: str) -> RunResult:
        return cls("refused", reason, 0)

    @classmethod
    def submitted(cls) -> RunResult:
        return cls("submitted", None, None)

    @classmethod
    def timed_out(cls, reason: str = "deadline_passed", cost_micros: int | None = None) -> RunResult:
        return cls("timed_out", reason, cost_micros)


@dataclass(frozen=True, slots=True)
class ClaimResult(_Data):
    """The answer of every guarded transition: a loser gets the winner's record, never an exception.

    ``reason`` is one of :data:`CLAIM_REASONS`: ``won``, ``duplicate`` (the edge was already
    taken), ``overlap``, ``superseded``, ``deleted``, ``disabled``, ``paused``, ``not_found``.
    """

    won: bool
    record: RunRecord | None
    reason: str


@dataclass(frozen=True, slots=True)
class Fire(_Data):
    """``decide``'s answer for a due routine: claim this fire and move the index.

    ``missed=True`` records the fire ``skipped(missed)`` instead of claiming it (past
    ``max_catch_up``). ``resend_at`` is when the first re-send may happen.
    """

    run_id: str
    fire_at: datetime
    expires_at: datetime
    next_due_at: datetime | None
    resend_at: datetime | None = None
    missed: bool = False


@dataclass(frozen=True, slots=True)
class NotDue(_Data):
    """``decide``'s answer when nothing is due after all (a stale index): just move it."""

    next_due_at: datetime | None


@dataclass(frozen=True, slots=True)
class Defer(_Data):
    """``decide``'s answer for a routine that cannot be planned: back off until ``until``."""

    until: datetime
    error: str


Decision = Fire | NotDue | Defer


@dataclass(frozen=True, slots=True)
class Deferral(_Data):
    """A routine deferred by one ``claim_due`` (one entry in the tick's ``errors``)."""

    org: str
    uid: str
    routine_id: str
    until: datetime
    error: str
    first: bool = True  # the first deferral of a streak (reported once, then backed off)


@dataclass(frozen=True, slots=True)
class ClaimBatch(_Data):
    """What one ``claim_due`` transaction did."""

    claimed: tuple[RunRecord, ...] = ()
    skipped: tuple[RunRecord, ...] = ()
    deferred: tuple[Deferral, ...] = ()


@dataclass(frozen=True, slots=True)
class Resends(_Data):
    """What one ``take_resends`` did: rows to send again, rows expired to ``skipped(missed)``."""

    resend: tuple[RunRecord, ...] = ()
    expired: tuple[RunRecord, ...] = ()


@dataclass(frozen=True, slots=True)
class Ceiling(_Data):
    """A daily money ceiling a run reserves against, by ``key`` (the ``spend`` row's ceiling key).

    Keys are FIXED-LENGTH whatever the ids (an id may be 200 characters, more than a store accepts
    for a whole key once three are joined), and unambiguous: ids never contain NUL, and the two
    kinds have distinct prefixes. Build them with :meth:`routine_key` / :meth:`org_key`:

    * per routine: ``routine:`` + sha256 hex of ``org NUL uid NUL routine_id`` (72 characters);
    * per org: ``org:`` + sha256 hex of ``org`` (68 characters).

    Every store validates a ceiling key as an id (at most 200 characters), identically.
    """

    key: str
    limit_micros: int

    @staticmethod
    def routine_key(org: str, uid: str, routine_id: str) -> str:
        """The ceiling key of one routine ``(org, uid, routine_id)``."""
        raw = "\x00".join((org, uid, routine_id)).encode("utf-8")
        return "routine:" + hashlib.sha256(raw).hexdigest()

    @staticmethod
    def org_key(org: str) -> str:
        """The ceiling key of one org."""
        return "org:" + hashlib.sha256(org.encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class ReserveResult(_Data):
    """``reserve``'s answer: ``ok``, or the first ceiling that would be exceeded."""

    ok: bool
    ceiling: str | None = None
    record: RunRecord | None = None


@dataclass(frozen=True, slots=True)
class PlannedFire(_Data):
    org: str
    uid: str
    routine_id: str
    run_id: str
    fire_at: datetime
    action: str  # "claim" | "skip:missed" | "defer" | "not_due"
    why: str = ""


@dataclass(frozen=True, slots=True)
class PlannedRoutine(_Data):
    org: str
    uid: str
    routine_id: str
    why: str


@dataclass(frozen=True, slots=True)
class TickPlan(_Data):
    """What a tick at ``at`` would do; read-only. Poll entries carry ``collect_run_id``."""

    at: datetime
    due: tuple[PlannedFire, ...] = ()
    resends: tuple[RunKey, ...] = ()
    expiring: tuple[RunKey, ...] = ()
    polls: tuple[dict[str, str], ...] = ()
    skipped: tuple[PlannedRoutine, ...] = ()
    inactive: tuple[PlannedRoutine, ...] = ()
    blocked: tuple[RunKey, ...] = ()


@dataclass(frozen=True, slots=True)
class TickError(_Data):
    routine: str
    error: str


@dataclass(frozen=True, slots=True)
class TickReport(_Data):
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

    SAMPLE = 5

    def to_dict(self) -> dict[str, Any]:  # type: ignore[override]
        n = self.SAMPLE
        return {
            "at": self.at.isoformat(),
            "claimed": len(self.claimed),
            "resent": len(self.resent),
            "collect": len(self.collect),
            "skipped": len(self.skipped) + len(self.expired),
            "blocked": len(self.blocked),
            "errors": len(self.errors),
            "sends_paused": self.sends_paused,
            "ids": {
                "claimed": [str(k) for k in self.claimed[:n]],
                "skipped": [str(k) for k in (self.skipped + self.expired)[:n]],
                "blocked": [str(k) for k in self.blocked[:n]],
                "errors": [e.to_dict() for e in self.errors[:n]],
            },
        }


# --------------------------------------------------------------------------- protocols


@runtime_checkable
class RunHandle(Protocol):
    """A runner's only door to its run row. The engine has already won ``claimed -> running``.

    Runners never claim and never write terminal states: they return a :class:`RunResult`.
    """

    @property
    def key(self) -> RunKey: ...

    @property
    def now(self) -> datetime: ...

    def result(self) -> RunRecord:
        """Re-read the run row (before any egress: an erasure or a ``record`` wins)."""
        ...

    def submit(
        self,
        batch_id: str | None,
        deadline: datetime,
        *,
        target_task_id: str | None = None,
        next_poll_at: datetime | None = None,
    ) -> ClaimResult:
        """``running -> submitted`` with the batch id (or target task id) and a mandatory deadline."""
        ...

    def begin_collecting(self) -> bool:
        """The ``submitted -> collecting`` CAS: only its winner may deliver."""
        ...

    def annotate(self, **values: Any) -> RunRecord:
        """Write session, turn, caps crossed, delivery hash, result text, cost repair. Never the state."""
        ...

    def reserve(self, amount_micros: int, ceilings: Sequence[Ceiling]) -> ReserveResult:
        """Reserve a hard per-run bound against every ceiling, atomically (all or nothing)."""
        ...

    @property
    def config_changed(self) -> bool:
        """True when the run was claimed under another ``config_revision`` than the routine's current one."""
        ...

    def last_delivery_hash(self) -> str | None:
        """The delivery hash of the routine's last ``completed(delivered)`` run (text suppression)."""
        ...


@runtime_checkable
class RoutineRunner(Protocol):
    """Runs routines of the kinds it serves. ``collect`` only for kinds that submit background work."""

    def validate(self, routine: Routine) -> None:
        """Raise (any exception; its message becomes the refusal reason) to refuse a routine."""
        ...

    def run(self, routine: Routine, handle: RunHandle) -> RunResult: ...


@runtime_checkable
class CollectingRunner(RoutineRunner, Protocol):
    def collect(self, routine: Routine, handle: RunHandle) -> RunResult: ...


@runtime_checkable
class Dispatcher(Protocol):
    """How claimed fires and polls leave the tick (after its commit), and how deep the run queue is."""

    def send_runs(self, runs: Sequence[RunRecord]) -> None:
        """Send one run message per record, expiring at ``record.expires_at``."""
        ...

    def send_collects(self, runs: Sequence[RunRecord]) -> None:
        """Send one collect message per submitted record (key = ``collect_run_id``)."""
        ...

    def run_queue_depth(self) -> int | None:
        """Messages waiting in the run queue, or None when unknown."""
        ...
