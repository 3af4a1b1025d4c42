"""The audit trail's pure parts: the one check of an ``actor``, and the ONE diff of a routine
before and after a write (schedule, definition and levers), which both stores append.
docs/architecture.md, section "The modules, in detail" (policies/audit.py).
"""

from __future__ import annotations

import getpass
import socket
import unicodedata
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from alma_schedule.errors import InvalidInput
from alma_schedule.model.data import plain
from alma_schedule.model.events import ACTIONS
from alma_schedule.model.routine import Routine

__all__ = [
    "FIELDS",
    "MAX_ACTOR",
    "STREAK_ACTOR",
    "auto_paused",
    "Entry",
    "backfilled",
    "cancelled_backfill",
    "check_actor",
    "diff",
    "entry",
    "local_actor",
    "put_action",
    "recorded",
]

#: The longest actor stored (characters).
MAX_ACTOR = 200
#: What a diff compares: the schedule, the definition and the levers.
FIELDS = ("kind", "schedule", "definition", "enabled", "paused_reason", "disabled_reason", "deleted_at")


def check_actor(actor: object) -> str | None:
    """The actor as given (None: unrecorded), else :class:`InvalidInput` naming ``actor``: not
    text, empty, over :data:`MAX_ACTOR` characters, or holding a control character."""
    if actor is None:
        return None
    if not isinstance(actor, str):
        raise InvalidInput(f"actor must be text, not {type(actor).__name__}")
    if not actor.strip():
        raise InvalidInput("actor is empty")
    if len(actor) > MAX_ACTOR:
        raise InvalidInput(f"actor is {len(actor)} characters long; the limit is {MAX_ACTOR}")
    if any(unicodedata.category(ch) in ("Cc", "Cs") for ch in actor):
        raise InvalidInput("actor contains a control character")
    return actor


def local_actor(name: str | None = None) -> str:
    """``user@host`` of this process (``name`` replaces the user: ``beat-sync@host``)."""
    try:
        user = name or getpass.getuser()
    except Exception:  # no user name (a container without passwd entry)
        user = name or "unknown"
    return f"{user}@{socket.gethostname() or 'localhost'}"[:MAX_ACTOR]


def _view(routine: Routine | None) -> dict[str, Any]:
    if routine is None:
        return {}
    return {name: plain(getattr(routine, name)) for name in FIELDS}


def diff(before: Routine | None, after: Routine | None) -> dict[str, dict[str, Any]]:
    """The fields of :data:`FIELDS` that differ, each ``{"before": ..., "after": ...}`` (JSON-ready;
    a side that does not exist reads None). Empty when nothing the operator controls changed."""
    old, new = _view(before), _view(after)
    out: dict[str, dict[str, Any]] = {}
    for name in FIELDS:
        a, b = old.get(name), new.get(name)
        if a != b:
            out[name] = {"before": a, "after": b}
    return out


@dataclass(frozen=True, slots=True)
class Entry:
    """An event to append (the store adds the key and the row id)."""

    at: datetime
    actor: str | None
    action: str
    reason: str | None
    diff: dict[str, Any]


def entry(
    action: str,
    at: datetime,
    actor: str | None,
    before: Routine | None,
    after: Routine | None,
    *,
    reason: str | None = None,
    always: bool = False,
) -> Entry | None:
    """The event of one write, or None when the write changed nothing the trail records (a no-op
    pause, an identical re-registration); ``always`` for writes that act without changing the
    routine (a trigger, a backfill, a record)."""
    if action not in ACTIONS:
        raise InvalidInput(f"action {action!r} is not one of {', '.join(ACTIONS)}")
    changes = diff(before, after)
    if not changes and not always:
        return None
    return Entry(at, actor, action, reason, changes)


def put_action(before: Routine | None, given: Routine) -> str:
    """A registration's action: ``sync`` (the beat sync's: the given routine's source is
    ``beat-sync:<app>``), ``register`` (a new row or a new incarnation) or ``update``."""
    if (given.source or "").startswith("beat-sync:"):
        return "sync"
    return "register" if before is None or before.deleted_at is not None else "update"


def recorded(at: datetime, actor: str | None, run_id: str, outcome: str, reason: str) -> Entry:
    """The event of an operator's ``record`` of one run (the routine itself is unchanged)."""
    return Entry(at, actor, "record", f"run {run_id} recorded {outcome}: {reason}", {})


def backfilled(at: datetime, actor: str | None, start: datetime, end: datetime, max_fires: int) -> Entry:
    """The event of a ``backfill`` request (the range and its bound)."""
    return Entry(at, actor, "backfill", f"{start.isoformat()}..{end.isoformat()} (max_fires {max_fires})", {})


def cancelled_backfill(at: datetime, actor: str | None) -> Entry:
    """The event of the cancel of a pending backfill."""
    return Entry(at, actor, "cancel_backfill", None, {})


#: The actor of the failure streak's automatic pause.
STREAK_ACTOR = "streak"


def auto_paused(at: datetime, latch: str) -> Entry:
    """The event of the failure streak's automatic pause (``latch``, the pause reason it wrote):
    by :data:`STREAK_ACTOR`, the diff of ``paused_reason`` alone. Appended by the finish's streak step
    (PostgreSQL's one-statement finish leaves a latching failure to that transaction: ``queries/finish.py``)."""
    return Entry(at, STREAK_ACTOR, "pause", latch, {"paused_reason": {"before": None, "after": latch}})
