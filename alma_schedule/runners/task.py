"""The ``task`` kind: a routine that sends one of the fleet's own Celery tasks, tracked or not.

docs/architecture.md, section "The modules, in detail" (runners/task.py).
"""

from __future__ import annotations

import json
import logging
import math
import re
import threading
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from alma_schedule.errors import ConfigurationError, InvalidInput, InvalidSchedule
from alma_schedule.model import Reason, Routine, RunHandle, RunKey, RunRecord, RunResult, RunState
from alma_schedule.policies.allow import TaskAllow
from alma_schedule.runners import task_allow
from alma_schedule.runners.celery_app import load_celery_app as load_celery_app  # re-exported (0.1.0 home)
from alma_schedule.runners.task_tracking import backend_problem, ended_link, late_result, send_expires

if TYPE_CHECKING:
    from celery import Celery

    from alma_schedule.settings import Settings

log = logging.getLogger(__name__)

KIND = "task"
OPTION_NAMES: tuple[str, ...] = ("queue", "priority", "expires")
DEFINITION_KEYS: tuple[str, ...] = ("task", "args", "kwargs", "options", "track", "deadline")
#: Namespace of the deterministic fleet task ids (uuid5 of the run key).
TASK_ID_NAMESPACE = uuid.UUID("6f1d3c52-6c1e-4d7e-9a52-4f0c8e2b7a11")
_CLASS_NAME = re.compile(r"[^A-Za-z0-9_.]")


def task_id_for(key: RunKey) -> str:
    """The fleet task id of one fire: a uuid5 of ``(org, uid, routine_id, run_id)``; stable everywhere."""
    return str(uuid.uuid5(TASK_ID_NAMESPACE, "\x1f".join(key.args())))


def _json_value(name: str, value: Any) -> Any:
    try:
        text = json.dumps(value, allow_nan=False)
    except RecursionError:
        raise InvalidInput(f"{name} is nested too deeply") from None
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"{name} must be JSON-serializable: {exc}") from None
    return json.loads(text)


@dataclass(frozen=True, slots=True)
class TaskDefinition:
    """A validated ``task`` definition. :meth:`parse` refuses anything a send could not carry as given."""

    task: str
    args: list[Any] = field(default_factory=list)
    kwargs: dict[str, Any] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)
    track: bool = False
    deadline: timedelta | None = None

    @classmethod
    def parse(cls, definition: Mapping[str, Any]) -> TaskDefinition:
        """Validate a definition mapping; raise :class:`InvalidInput` naming the field and the reason."""
        if not isinstance(definition, Mapping):
            raise InvalidInput(f"a task definition must be a JSON object, got {type(definition).__name__}")
        unknown = sorted(str(k) for k in definition if k not in DEFINITION_KEYS)
        if unknown:
            raise InvalidInput(f"unknown key {unknown[0]!r} in task definition (allowed: {', '.join(DEFINITION_KEYS)})")
        name = definition.get("task")
        if not isinstance(name, str) or not name.strip() or name != name.strip():
            raise InvalidInput("task definition needs 'task': the registered name of a Celery task")
        args = definition.get("args", [])
        if not isinstance(args, (list, tuple)):
            raise InvalidInput(f"'args' must be a list, got {type(args).__name__}")
        kwargs = definition.get("kwargs", {})
        if not isinstance(kwargs, Mapping) or not all(isinstance(k, str) for k in kwargs):
            raise InvalidInput("'kwargs' must be an object with string keys")
        options = _options(definition.get("options", {}))
        track = definition.get("track", False)
        if not isinstance(track, bool):
            raise InvalidInput(f"'track' must be true or false, got {type(track).__name__}")
        deadline = None
        raw_deadline = definition.get("deadline")
        if track:
            if raw_deadline is None:
                raise InvalidInput("a tracked task needs a 'deadline' (e.g. '2h'): how long to wait for its result")
            deadline = _deadline(raw_deadline)
        elif raw_deadline is not None:
            raise InvalidInput("'deadline' applies only to tracked tasks (set 'track': true)")
        return cls(
            task=name,
            args=list(_json_value("'args'", list(args))),
            kwargs=dict(_json_value("'kwargs'", dict(kwargs))),
            options=options,
            track=track,
            deadline=deadline,
        )

    def to_json(self) -> dict[str, Any]:
        """The normalised definition (empty parts left out)."""
        out: dict[str, Any] = {"task": self.task}
        if self.args:
            out["args"] = list(self.args)
        if self.kwargs:
            out["kwargs"] = dict(self.kwargs)
        if self.options:
            out["options"] = dict(self.options)
        if self.track:
            from alma_schedule.core.interval import format_interval

            assert self.deadline is not None
            out["track"] = True
            out["deadline"] = format_interval(self.deadline)
        return out


def _options(raw: Any) -> dict[str, Any]:
    if not isinstance(raw, Mapping):
        raise InvalidInput(f"'options' must be an object, got {type(raw).__name__}")
    out: dict[str, Any] = {}
    for key, value in raw.items():
        if key not in OPTION_NAMES:
            raise InvalidInput(
                f"send option {key!r} is not supported (task routines carry only {', '.join(OPTION_NAMES)})"
            )
        if key == "queue":
            if not isinstance(value, str) or not value.strip():
                raise InvalidInput("option 'queue' must be a non-empty string")
        elif key == "priority":
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 255:
                raise InvalidInput("option 'priority' must be an integer 0-255")
        else:  # expires
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise InvalidInput("option 'expires' must be a number of seconds (after the send)")
            if value <= 0:
                raise InvalidInput("option 'expires' must be positive")
        out[key] = value
    return out


def _deadline(raw: Any) -> timedelta:
    from alma_schedule.core.interval import parse_interval

    try:
        return parse_interval(raw, name="deadline")
    except InvalidSchedule as exc:  # named 'deadline', the field the user wrote (never 'every')
        text = str(exc)
        raise InvalidInput(text if text.startswith("'deadline'") else f"'deadline': {text}") from None


class TaskRunner:
    """Runs routines of kind ``task`` on a fleet's Celery ``app`` (the app that knows the tasks).

    ``validate`` raises :class:`InvalidInput` with the reason; ``run`` sends once per fire;
    ``collect`` reads the result backend for tracked tasks. Thread-safe (the app is).
    """

    kind = KIND

    def __init__(self, app: Celery, *, allow: TaskAllow | None = None, collect_queue: str = "alma.collect") -> None:
        self.app = app
        self.allow = TaskAllow() if allow is None else allow
        self.collect_queue = collect_queue
        self._loaded = False
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ validation

    def tasks(self) -> Mapping[str, Any]:
        """The app's registered tasks, after importing its configured modules once."""
        if not self._loaded:
            with self._lock:
                if not self._loaded:
                    self.app.loader.import_default_modules()
                    self._loaded = True
        tasks: Mapping[str, Any] = self.app.tasks
        return tasks

    def problem(self, definition: TaskDefinition) -> tuple[str, str] | None:
        """``(class, reason)`` when this app cannot send or track ``definition``, else None."""
        tasks = self.tasks()
        if definition.task not in tasks:
            return "NotRegistered", (
                f"task {definition.task!r} is not registered in the Celery app {self.app.main!r} "
                "(after importing its modules)"
            )
        refused = self.not_allowed(definition)
        if refused is not None:
            return "NotAllowed", refused
        if not definition.track:
            return None
        backend = backend_problem(self.app)
        if backend:
            return "TrackingUnavailable", f"cannot track {definition.task!r}: {backend}"
        if getattr(tasks[definition.task], "ignore_result", False):
            return "TrackingUnavailable", (
                f"cannot track {definition.task!r}: the task ignores its results (ignore_result=True), "
                "so its state would stay PENDING until the deadline every time"
            )
        expires = self.app.conf.result_expires
        if isinstance(expires, (int, float)):
            expires = timedelta(seconds=expires)
        if isinstance(expires, timedelta) and expires.total_seconds() > 0:
            assert definition.deadline is not None
            if definition.deadline > expires:
                return "TrackingUnavailable", (
                    f"cannot track {definition.task!r}: its deadline ({definition.deadline}) is longer than "
                    f"the app's result_expires ({expires}); a result could vanish before it is collected"
                )
        return None

    def not_allowed(self, definition: TaskDefinition) -> str | None:
        """Why the allow-list refuses ``definition``'s task or queue (one line), or None."""
        d = definition
        return task_allow.refusal(self.app, self.allow, d.task, d.options, d.args, d.kwargs)

    def check(self, definition: TaskDefinition) -> None:
        """Refuse (:class:`InvalidInput` with the reason) a definition this app cannot send or track."""
        found = self.problem(definition)
        if found:
            raise InvalidInput(found[1])

    def validate(self, routine: Routine) -> None:
        if routine.kind != KIND:
            raise InvalidInput(f"the task runner serves kind {KIND!r}, not {routine.kind!r}")
        self.check(TaskDefinition.parse(routine.definition))

    # ------------------------------------------------------------------ run and collect

    def run(self, routine: Routine, handle: RunHandle) -> RunResult:
        """Send the task once (the engine has won ``claimed -> running``).

        docs/architecture.md, "The modules, in detail" (runners/task.py, TaskRunner.run).
        """
        definition = TaskDefinition.parse(routine.definition)
        refused = self.not_allowed(definition)
        if refused is not None:  # stored before a narrowing of task_allow / queue_allow
            log.warning("task routine %s refused: %s", handle.key, refused)
            return RunResult.refused(Reason.NOT_ALLOWED)
        found = self.problem(definition)
        if found:
            log.warning("task routine %s not sent: %s", handle.key, found[1])
            return RunResult.failed(Reason.RUNNER_ERROR, error_class=found[0])
        task_id = task_id_for(handle.key)
        if definition.track:
            assert definition.deadline is not None
            claim = handle.submit(None, handle.now + definition.deadline, target_task_id=task_id)
            if not claim.won:
                log.info("task routine %s: submit lost (%s); nothing sent", handle.key, claim.reason)
                return RunResult.submitted()
        try:
            expires = send_expires(definition.options, definition.deadline) if definition.track else None
            # a fixed delay counts from the task's END: its collect is linked to it (no wait for a poll)
            ended = ended_link(self.app, handle.key, self.collect_queue) if "after" in routine.schedule else None
            self._send(definition, task_id, expires, ended)
        except Exception as exc:
            log.warning("task routine %s: send of %s failed: %r", handle.key, definition.task, exc)
            return RunResult.failed(Reason.RUNNER_ERROR, error_class=type(exc).__name__)
        if definition.track:
            return RunResult.submitted()
        return RunResult.completed(Reason.SENT)

    def _send(self, definition: TaskDefinition, task_id: str, expires: float | None = None, ended: Any = None) -> None:
        opts = dict(definition.options)
        if expires is not None:  # tracked: revoked, never run, past its deadline
            opts["expires"] = expires
        if ended is not None:  # the collect of the run, sent when the task succeeds or fails
            opts["link"], opts["link_error"] = ended, ended
        self.app.send_task(
            definition.task,
            args=list(definition.args),
            kwargs=dict(definition.kwargs),
            task_id=task_id,
            add_to_parent=False,
            serializer="json",
            **opts,
        )

    def collect(self, routine: Routine, handle: RunHandle) -> RunResult:
        """Poll the tracked task's state; finish only from its terminal states (one collector wins)."""
        record = handle.result()
        if record.state != RunState.SUBMITTED:
            return RunResult.submitted()
        task_id = record.target_task_id
        if not task_id:
            return RunResult.failed(Reason.RUNNER_ERROR, error_class="MissingTargetTaskId")
        result = self.app.AsyncResult(task_id)
        state = result.state
        if state not in ("SUCCESS", "FAILURE", "REVOKED"):
            return RunResult.submitted()
        if state == "REVOKED" and record.deadline is not None and handle.now >= record.deadline:
            return RunResult.submitted()  # expired at its deadline: timed_out past the tolerance (engine)
        if not handle.begin_collecting():
            return RunResult.submitted()
        if state == "SUCCESS":
            return RunResult.completed(Reason.OK)
        if state == "REVOKED":
            return RunResult.failed(Reason.TASK_REVOKED, error_class=_class_name(result.result) or "Revoked")
        return RunResult.failed(Reason.TASK_FAILED, error_class=_class_name(result.result))

    def late_result(self, record: RunRecord) -> str:
        """What the tracked task's result backend says as its run times out (for the log line)."""
        return late_result(self.app, record)


def _class_name(value: Any) -> str | None:
    if isinstance(value, BaseException):
        return _CLASS_NAME.sub("", type(value).__name__)[:100] or None
    return None


# ---------------------------------------------------------------------- the kind registry's factory


def from_settings(settings: Settings) -> TaskRunner:
    """The ``task`` runner of the kind registry: the fleet app named by ``ALMA_CELERY_APP``."""
    if not settings.celery_app:
        raise ConfigurationError("ALMA_CELERY_APP is not set: task routines need the fleet's Celery app (MODULE:APP)")
    app = load_celery_app(settings.celery_app)
    return TaskRunner(app, allow=TaskAllow.from_settings(settings), collect_queue=settings.collect_queue)
