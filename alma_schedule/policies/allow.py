"""Which tasks and queues a ``task`` routine may name.

docs/architecture.md, section "The modules, in detail" (policies/allow.py).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from alma_schedule.settings import Settings

__all__ = ["NEVER_QUEUES", "NEVER_TASKS", "TaskAllow", "queue_refusal", "task_refusal"]

#: Tasks a routine never sends: ours and Celery's built-ins.
NEVER_TASKS: tuple[str, ...] = ("alma_schedule.*", "celery.*")
#: Queues a routine never sends to: ours and Celery's internal ones (events, remote control).
NEVER_QUEUES: tuple[str, ...] = ("alma.*", "celeryev.*", "*.pidbox")

TASK_SETTING = "ALMA_TASK_ALLOW"
QUEUE_SETTING = "ALMA_QUEUE_ALLOW"


def _first_match(name: str, patterns: Sequence[str]) -> str | None:
    return next((p for p in patterns if fnmatchcase(name, p)), None)


def task_refusal(task: str, allow: Sequence[str] = ()) -> str | None:
    """Why a routine may not send ``task`` (one line naming it and the setting), or None.
    ``allow`` is ``task_allow`` (empty: no narrowing). Registration by the app is checked apart."""
    never = _first_match(task, NEVER_TASKS)
    if never is not None:
        return (
            f"task {task!r} is not allowed: a task routine never sends {never} tasks "
            f"(only the fleet's own; {TASK_SETTING} cannot allow them)"
        )
    if allow and _first_match(task, allow) is None:
        return f"task {task!r} is not allowed: it matches none of {TASK_SETTING} ({', '.join(allow)})"
    return None


def queue_refusal(queue: str, allow: Sequence[str] = (), ours: Collection[str] = ()) -> str | None:
    """Why a routine may not send to ``queue`` (one line naming it and the setting), or None.
    ``allow`` is ``queue_allow`` (empty: no narrowing); ``ours`` the configured queues of ours."""
    never = "our queue" if queue in ours else _first_match(queue, NEVER_QUEUES)
    if never is not None:
        shown = never if never == "our queue" else f"a {never} queue"
        return (
            f"queue {queue!r} is not allowed: a task routine never sends to {shown} "
            f"(alma.*, our configured queues, celeryev.*, *.pidbox; {QUEUE_SETTING} cannot allow them)"
        )
    if allow and _first_match(queue, allow) is None:
        return f"queue {queue!r} is not allowed: it matches none of {QUEUE_SETTING} ({', '.join(allow)})"
    return None


@dataclass(frozen=True, slots=True)
class TaskAllow:
    """The allow-list one ``task`` runner applies: ``task_allow``, ``queue_allow`` (globs; empty:
    no narrowing) and our configured queue names (never allowed, whatever they are called)."""

    tasks: tuple[str, ...] = ()
    queues: tuple[str, ...] = ()
    ours: frozenset[str] = frozenset({"alma.tick", "alma.run", "alma.collect"})

    @classmethod
    def from_settings(cls, s: Settings) -> TaskAllow:
        return cls(
            tasks=tuple(s.task_allow),
            queues=tuple(s.queue_allow),
            ours=frozenset({s.tick_queue, s.run_queue, s.collect_queue}),
        )

    def task_refusal(self, task: str) -> str | None:
        return task_refusal(task, self.tasks)

    def queue_refusal(self, queue: str) -> str | None:
        return queue_refusal(queue, self.queues, self.ours)
