"""Poison messages on our queues (issue 14, defect 1), with a real worker on the real Redis.

Each body ``"hello"``, ``{}``, ``[1, 2]``, ``42`` and ``null`` (raw JSON published with kombu) on
each of our queues, without Celery headers and with headers naming the queue's task, plus bodies
that are ``[args, kwargs, embed]`` but no call of the task (wrong arity, wrong JSON types, a
missing id header), a body that is not JSON, a pickle, and a task name the worker does not know: the
worker lives, refuses each (one warning line), republishes each to ``alma.dead`` and acks it, so
our queues end empty; then a good message on each queue runs.
"""

from __future__ import annotations

import base64
import json
import pickle
import uuid
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import redis
from celery_support import inprocess_worker, make_settings, utcnow, wait_for, wait_worker_ready
from kombu import Connection
from test_e2e_workers import (
    E2E,
    e2e,  # noqa: F401 (the fixture: PostgreSQL store, count kind, Procs)
)

from alma_schedule.celery import create_app
from alma_schedule.model import COLLECT_TASK, RUN_MANY_TASK, RUN_TASK, TICK_TASK, RoutineSpec, Scope
from alma_schedule.settings import Settings
from alma_schedule.stores import migrate_store
from alma_schedule.tasks.poison import refused_total

pytestmark = [pytest.mark.redis]

SCOPE = Scope("acme", "poison")
OURS = {"alma.tick": (TICK_TASK,), "alma.run": (RUN_TASK, RUN_MANY_TASK), "alma.collect": (COLLECT_TASK,)}
BODIES: list[Any] = ["hello", {}, [1, 2], 42, None]
NOT_JSON = b"not json {"
PICKLE = pickle.dumps(((), {}, {}))  # a worker of our queues accepts JSON only
#: [args, kwargs, embed] bodies that still are no call of the task (by task name).
NOT_A_CALL: dict[str, list[Any]] = {
    TICK_TASK: [[[], {"now": 5}, {}], [["a", "b", "c"], {}, None], [[], {"later": "x"}, {}], [[], [], {}]],
    RUN_TASK: [[["a", "b", "c"], {}, {}], [[1, 2, 3, 4], {}, {}], [["a", "b", "c", "d"], {}, 7]],
    RUN_MANY_TASK: [[[[1, 2]], {}, {}], [[], {}, {}], [["x"], {}, {}]],
    COLLECT_TASK: [[["a", "b", "c", None], {}, {}], [{"org": "a"}, {}, {}]],
}


def headers_of(task: str, *, with_id: bool = True) -> dict[str, Any]:
    out: dict[str, Any] = {"lang": "py", "task": task, "retries": 0, "timelimit": [None, None]}
    if with_id:
        out.update(id=str(uuid.uuid4()), root_id=None, parent_id=None, argsrepr="", kwargsrepr="")
    return out


def poison_messages() -> list[tuple[str, Any, dict[str, Any] | None]]:
    """``(queue, body, headers)`` of every poison message the test publishes."""
    out: list[tuple[str, Any, dict[str, Any] | None]] = []
    for queue, tasks in OURS.items():
        for body in BODIES:
            out.append((queue, body, None))
            out.extend((queue, body, headers_of(task)) for task in tasks)
        out.append((queue, NOT_JSON, None))
        out.append((queue, "hello", {"task": "no.such.task"}))  # unknown, no id: crashed Celery
        out.append((queue, [[], {}, {}], headers_of("no.such.task")))
        out.append((queue, [[], {}, {}], {"task": "no.such.task", "id": [1]}))  # an id no backend key takes
        for task in tasks:
            out.extend((queue, body, headers_of(task)) for body in NOT_A_CALL[task])
            out.append((queue, [[], {}, {}], headers_of(task, with_id=False)))
            out.append((queue, NOT_JSON, headers_of(task)))
            out.append((queue, PICKLE, headers_of(task)))
            out.append((queue, [[], {}, {}], {**headers_of(task), "shadow": ["x"]}))
    return out


def raw(body: Any) -> bytes:
    return body if isinstance(body, bytes) else json.dumps(body).encode()


def publish_raw(broker_url: str, queue: str, body: Any, headers: dict[str, Any] | None) -> None:
    """``body`` as raw JSON bytes on ``queue`` (the default exchange), with ``headers`` if given."""
    content_type = "application/x-python-serialize" if body == PICKLE else "application/json"
    with Connection(broker_url) as conn:
        conn.Producer().publish(
            raw(body),
            routing_key=queue,
            content_type=content_type,
            content_encoding="utf-8",
            headers=headers or {},
        )


def queue_lengths(r: redis.Redis, queues: list[str]) -> dict[str, int]:
    return {q: int(r.llen(q)) for q in queues}


def dead_letters(r: redis.Redis) -> list[dict[str, Any]]:
    return [json.loads(raw) for raw in r.lrange("alma.dead", 0, -1)]


@pytest.mark.slow
@pytest.mark.postgres
def test_poison_on_every_queue_is_refused_dead_lettered_and_the_worker_serves_the_next_message(
    e2e: E2E,  # noqa: F811 (the imported fixture)
    redis_client: redis.Redis,
) -> None:
    settings, schedule, procs = e2e.settings, e2e.schedule, e2e.procs
    store, app = schedule.store, create_app(settings)
    poison = poison_messages()
    for queue, body, headers in poison:
        publish_raw(settings.broker_url, queue, body, headers)
    worker = procs.worker("w", e2e.env(), ",".join(OURS), 1)
    wait_worker_ready(procs, "w")

    def refused_all() -> bool:
        assert worker.poll() is None, f"the worker died:\n{procs.log('w')[-3000:]}"
        return len(dead_letters(redis_client)) >= len(poison)

    try:
        wait_for(refused_all, 60, 0.2, f"{len(poison)} dead letters")
    except AssertionError as exc:  # say what the worker did
        got = len(dead_letters(redis_client))
        raise AssertionError(f"{exc}: {got} dead letters; worker log:\n{procs.log('w')[-4000:]}") from None

    # the good messages after it: a tick (tick queue) claims a due fire, its run (run queue)
    # executes it, and a collect of that run (collect queue) answers
    spec = RoutineSpec(SCOPE.org, SCOPE.uid, "after-poison", "count", {"every": "1h"})
    schedule.register(spec, now=utcnow() - timedelta(hours=1, seconds=1))
    app.send_task(TICK_TASK, queue="alma.tick")
    wait_for(lambda: store.list_runs(SCOPE, state="completed"), 60, 0.2, "the claimed fire to complete")
    (record,) = store.list_runs(SCOPE)
    run_key = record.key
    app.send_task(COLLECT_TASK, args=run_key.args(), queue="alma.collect")
    wait_for(
        lambda: f"{COLLECT_TASK}[" in procs.log("w") and "succeeded" in procs.log("w").split(COLLECT_TASK + "[")[-1],
        60,
        0.2,
        "the collect to run",
    )

    assert worker.poll() is None, procs.log("w")[-3000:]
    log = procs.log("w")
    assert "Unrecoverable error" not in log
    dead = dead_letters(redis_client)
    assert len(dead) == len(poison)  # each refused once: none requeued, none lost
    assert Counter(d["headers"]["x-alma-queue"] for d in dead) == Counter(q for q, _b, _h in poison)
    bodies = Counter(base64.b64decode(d["body"]) for d in dead)
    assert bodies == Counter(raw(b) for _q, b, _h in poison)
    assert all(d["headers"]["x-alma-refused"] for d in dead)
    assert not any("task" in d["headers"] for d in dead)  # a dead copy is no task message
    assert log.count("alma_schedule: refused a message on ") == len(poison)
    assert queue_lengths(redis_client, list(OURS)) == dict.fromkeys(OURS, 0)
    assert not redis_client.hlen("unacked")  # acked, not waiting for a redelivery


def test_a_refusal_is_counted_in_the_worker_process(redis_url: str, redis_client: redis.Redis, tmp_path: Path) -> None:
    settings: Settings = make_settings(f"sqlite:///{tmp_path / 'store.sqlite3'}", redis_url)
    migrate_store(settings.database_url)
    app = create_app(settings)
    before = {q: refused_total(q) for q in OURS}
    with inprocess_worker(app, list(OURS)):
        publish_raw(redis_url, "alma.run", [1, 2], headers_of(RUN_TASK))
        publish_raw(redis_url, "alma.collect", "hello", None)
        wait_for(lambda: redis_client.llen("alma.dead") >= 2, 30, 0.1, "two dead letters")
    assert {q: refused_total(q) - before[q] for q in OURS} == {"alma.tick": 0, "alma.run": 1, "alma.collect": 1}
    assert queue_lengths(redis_client, list(OURS)) == dict.fromkeys(OURS, 0)
