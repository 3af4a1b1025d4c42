"""A run's owner (``runs.owner``) and what Celery's report that the owner was lost does to the run.

docs/architecture.md, section "The modules, in detail" (policies/ownership.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from alma_schedule.errors import InvalidInput
from alma_schedule.model import BlockedWhy, Reason, RunKey, RunResult

__all__ = [
    "MAX_OWNER_LENGTH",
    "OWNER_SEPARATOR",
    "check_owner",
    "is_untracked_task",
    "lost_effect",
    "owned_by",
    "owner_of",
]

#: Between the request id and the fire's key in the owner of a packed fire.
OWNER_SEPARATOR = "/"
#: The longest owner a store accepts (a request id and a key of four ids of at most 200 each).
MAX_OWNER_LENGTH = 1024


def owner_of(request_id: str, key: RunKey | None = None) -> str:
    """The owner a run task writes: the request id, plus ``/<key>`` for a fire of ``run_many``."""
    return request_id if key is None else f"{request_id}{OWNER_SEPARATOR}{key}"


def check_owner(owner: object, name: str = "owner") -> str:
    """``owner`` if it is a non-empty string of at most :data:`MAX_OWNER_LENGTH` characters without
    NUL; else :class:`InvalidInput` naming ``name``."""
    if not isinstance(owner, str):
        raise InvalidInput(f"{name} must be a string, not {type(owner).__name__}")
    if not owner or len(owner) > MAX_OWNER_LENGTH or "\x00" in owner:
        raise InvalidInput(f"{name} must be 1 to {MAX_OWNER_LENGTH} characters without NUL")
    if not owner.isascii():
        try:
            owner.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidInput(f"{name} is not valid UTF-8 text") from None
    return owner


def owned_by(owner: str | None, request_id: str) -> bool:
    """Whether a run whose owner is ``owner`` belongs to the Celery request ``request_id``."""
    return owner is not None and (owner == request_id or owner.startswith(request_id + OWNER_SEPARATOR))


def is_untracked_task(kind: str, definition: Mapping[str, Any]) -> bool:
    """A ``task`` routine that does not track its task: its whole effect is one send."""
    return kind == "task" and definition.get("track") is not True


def lost_effect(kind: str, definition: Mapping[str, Any], why: BlockedWhy) -> RunResult | BlockedWhy:
    """What a loss report (``why``: ``worker_lost`` or ``time_limit``) does to a ``running`` run of
    a routine of ``kind`` / ``definition``: the terminal result to finish it with (an untracked
    task), or the why to mark it blocked with (everything else)."""
    if is_untracked_task(kind, definition):
        error_class = "WorkerLostError" if why == BlockedWhy.WORKER_LOST else "TimeLimitExceeded"
        return RunResult.failed(Reason.WORKER_LOST, error_class=error_class)
    return why
