"""The closed set of reason codes the ledger may hold. Raw errors never reach it."""

from __future__ import annotations

import enum

__all__ = ["REASONS", "Reason"]


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
    #: a schedule fire whose start would pass its routine's ``max_runs`` (the start CAS ends it)
    FINISHED = "finished"
    #: a fire of a cron on a business calendar that rolled onto a day another fire of the routine runs
    #: (core/calendar.py ``collided``; written beside the next claim, ``Fire.collided``); never overdue
    CALENDAR = "calendar"
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
    #: Celery reported the owner of an UNTRACKED ``task`` run lost (a killed child, a hard time
    #: limit): its whole effect is one send, so it ends here (never counted for the streak).
    WORKER_LOST = "worker_lost"
    # refused
    NOT_ADMITTED = "not_admitted"
    ROUTING_UNAVAILABLE = "routing_unavailable"
    CAP_EXCEEDED = "cap_exceeded"
    CEILING_REACHED = "ceiling_reached"
    NOT_ALLOWED = "not_allowed"  # a task routine's task or queue is outside task_allow / queue_allow
    # timed_out
    DEADLINE_PASSED = "deadline_passed"
    # operator
    RECONCILED = "reconciled"
    OPERATOR = "operator"


REASONS: frozenset[str] = frozenset(r.value for r in Reason)
