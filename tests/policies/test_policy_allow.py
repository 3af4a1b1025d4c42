"""Which tasks and queues a task routine may name, as pure functions (issue 14, defect 5)."""

from __future__ import annotations

import pytest

from alma_schedule.policies.allow import NEVER_QUEUES, NEVER_TASKS, TaskAllow, queue_refusal, task_refusal
from alma_schedule.settings import load_settings

OUR_TASKS = ["alma_schedule.run", "alma_schedule.tick", "alma_schedule.collect", "alma_schedule.run_many"]
CELERY_TASKS = ["celery.map", "celery.group", "celery.chord", "celery.chain", "celery.backend_cleanup"]


def test_the_rule_never_allows_ours_nor_celerys() -> None:
    assert NEVER_TASKS == ("alma_schedule.*", "celery.*")
    assert NEVER_QUEUES == ("alma.*", "celeryev.*", "*.pidbox")


@pytest.mark.parametrize("task", OUR_TASKS + CELERY_TASKS)
@pytest.mark.parametrize("allow", [(), ("*",), ("alma_schedule.*", "celery.*")], ids=["default", "star", "named"])
def test_our_tasks_and_celerys_are_refused_whatever_task_allow_says(task: str, allow: tuple[str, ...]) -> None:
    line = task_refusal(task, allow)
    assert line is not None and f"'{task}'" in line and "ALMA_TASK_ALLOW" in line and "\n" not in line


@pytest.mark.parametrize("task", ["fleet.add", "proj.reports.build", "celery_tasks.x", "alma_schedules.x"])
def test_every_other_task_is_allowed_by_default(task: str) -> None:
    assert task_refusal(task) is None


def test_task_allow_narrows_with_globs() -> None:
    allow = ("proj.reports.*", "billing.clo?e")
    assert task_refusal("proj.reports.build", allow) is None
    assert task_refusal("billing.close", allow) is None
    line = task_refusal("proj.mail.send", allow)
    assert line is not None and "'proj.mail.send'" in line and "ALMA_TASK_ALLOW (proj.reports.*, billing.clo?e)" in line
    assert task_refusal("PROJ.reports.build", allow) is not None  # case matters, as in task names


@pytest.mark.parametrize(
    "queue",
    [
        "alma.run",
        "alma.tick",
        "alma.collect",
        "alma.dead",
        "alma.x",
        "celeryev.1f2e",
        "w1@host.celery.pidbox",
        "reply.celery.pidbox",
    ],
)
def test_our_queues_and_celerys_internal_ones_are_refused(queue: str) -> None:
    for allow in ((), ("*",), (queue,)):
        line = queue_refusal(queue, allow)
        assert line is not None and f"'{queue}'" in line and "ALMA_QUEUE_ALLOW" in line


@pytest.mark.parametrize("queue", ["celery", "reports", "fleet.sync", "almanac", "celeryevents"])
def test_every_other_queue_is_allowed_by_default(queue: str) -> None:
    assert queue_refusal(queue) is None


def test_our_configured_queues_are_refused_whatever_they_are_called() -> None:
    allow = TaskAllow.from_settings(load_settings(environ={"ALMA_RUN_QUEUE": "jobs.runs", "ALMA_TICK_QUEUE": "t"}))
    assert allow.ours == frozenset({"jobs.runs", "t", "alma.collect"})
    for queue in ("jobs.runs", "t", "alma.collect", "alma.run"):
        line = allow.queue_refusal(queue)
        assert line is not None and f"'{queue}'" in line
    assert allow.queue_refusal("jobs.other") is None


def test_queue_allow_narrows_and_the_default_celery_queue_then_needs_naming() -> None:
    allow = ("reports", "fleet.*")
    assert queue_refusal("reports", allow) is None
    assert queue_refusal("fleet.sync", allow) is None
    line = queue_refusal("celery", allow)
    assert line is not None and "ALMA_QUEUE_ALLOW (reports, fleet.*)" in line
    assert queue_refusal("celery", ("celery", "reports")) is None


def test_the_settings_build_the_allow_list() -> None:
    s = load_settings(environ={"ALMA_TASK_ALLOW": "proj.reports.*, billing.close,", "ALMA_QUEUE_ALLOW": "reports"})
    allow = TaskAllow.from_settings(s)
    assert allow.tasks == ("proj.reports.*", "billing.close") and allow.queues == ("reports",)
    assert allow.task_refusal("proj.mail.send") is not None and allow.task_refusal("billing.close") is None
    assert allow.queue_refusal("celery") is not None and allow.queue_refusal("reports") is None
    default = TaskAllow.from_settings(load_settings(environ={}))
    assert default == TaskAllow()
