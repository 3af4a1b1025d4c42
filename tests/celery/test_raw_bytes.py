"""Raw bytes on the queues of a worker of ours (issue 45, item 1), with a real fleet worker on the
real Redis: ``-Q alma.run,celery`` (ours and the fleet's own queue on one worker).

Bytes that are no envelope kombu can read (``garbage-not-an-envelope``, ``{"body": 1}``, non-UTF-8,
an envelope without its delivery info, a body that is not base64, ``null`` headers), LPUSHed on
both queues and PUBLISHed on the worker's pub/sub control channel: the worker lives, each item is on
``alma.dead`` as it came (``x-alma-raw``, the queue, the reason) and acked (nothing left anywhere),
and the next messages run: a ping on the control channel, a tick's claimed fire on ``alma.run``,
its fleet task on ``celery``.
Before, the first of them made the worker exit (``Unrecoverable error: JSONDecodeError``, or
``KeyError('properties')``) and the item was lost.
"""

from __future__ import annotations

import base64
import json
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import redis
from celery import Celery
from celery_support import CELERY, Procs, utcnow, wait_for, wait_worker_ready
from fleet_project import clean_env

from alma_schedule.celery import install
from alma_schedule.engine import create_schedule
from alma_schedule.model import RoutineSpec, Scope
from alma_schedule.runners.task import TaskRunner
from alma_schedule.tasks import CeleryDispatcher

pytestmark = [pytest.mark.redis, pytest.mark.slow]

SCOPE = Scope("acme", "bytes")
FLEET = """\
import redis
from celery import Celery
from alma_schedule.celery import install

app = Celery("fleet", broker={broker!r})
app.conf.update(alma_database_url={store!r}, timezone="UTC")
effects = redis.Redis.from_url({broker!r})


@app.task(name="fleet.record")
def record(entry):
    effects.rpush("fleet:effects", entry)


install(app)
"""
_INFO = '"delivery_info": {"exchange": "", "routing_key": "x"}'
#: Items no kombu channel can take, each LPUSHed raw on both queues.
RAW: list[bytes] = [
    b"garbage-not-an-envelope",
    b'{"body": 1}',
    b"\xff\xfe\xfd not UTF-8 \x80",
    b"[1, 2, 3]",
    b"null",
    b'{"body": "aGk=", "headers": {}, "properties": {"delivery_tag": "t1"}}',
    b'{"body": "a", "headers": {}, "properties": {"delivery_tag": "t2", "body_encoding": "base64", '
    + _INFO.encode()
    + b"}}",
    b'{"body": "aGk=", "headers": null, "properties": {"delivery_tag": "t3", ' + _INFO.encode() + b"}}",
    b'{"body": "aGk=", "headers": {"task": "x"}, "properties": {"delivery_tag": 7, ' + _INFO.encode() + b"}}",
]
QUEUES = ("alma.run", "celery")


def dead_letters(r: redis.Redis) -> list[dict[str, Any]]:
    return [json.loads(item) for item in r.lrange("alma.dead", 0, -1)]


def sender(redis_url: str, store: str) -> Celery:
    """The fleet's app in this process (what its web process would hold), to tick through."""
    app = Celery("fleet", set_as_current=False)
    app.conf.update(broker_url=redis_url, alma_database_url=store, timezone="UTC")

    @app.task(name="fleet.record", shared=False)
    def record(entry: str) -> None:  # pragma: no cover (runs on the worker)
        raise AssertionError("the worker runs it")

    return app


def test_raw_bytes_on_our_queue_and_the_fleets_are_dead_lettered_and_the_worker_serves_the_next(
    redis_url: str, redis_client: redis.Redis, migrated_sqlite_url: str, tmp_path: Path
) -> None:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "fleet.py").write_text(FLEET.format(broker=redis_url, store=migrated_sqlite_url))
    procs = Procs(tmp_path)
    argv = [CELERY, "-A", "fleet", "worker", "-Q", ",".join(QUEUES), "-c", "1", "-n", "w@%h"]
    worker = procs.start("w", [*argv, "--loglevel", "INFO", "--without-mingle", "--without-gossip"], clean_env(), root)
    app = sender(redis_url, migrated_sqlite_url)
    composition = install(app)
    try:
        wait_worker_ready(procs, "w")
        for item in RAW:
            for queue in QUEUES:
                redis_client.lpush(queue, item)
        db = int(redis_url.rsplit("/", 1)[1])
        published = [redis_client.publish(f"/{db}.celery.pidbox", item) for item in RAW[:3]]
        assert published == [1, 1, 1]  # the worker's control consumer got each
        assert wait_for(lambda: app.control.ping(timeout=1), 30, 0.1, "a ping answered")  # the next broadcast

        settings = composition.settings
        schedule = create_schedule(
            store=composition.store(),
            runner=TaskRunner(app),
            dispatcher=CeleryDispatcher(app, settings),
            settings=settings,
        )
        spec = RoutineSpec(
            SCOPE.org, SCOPE.uid, "after", "task", {"every": "1h"}, {"task": "fleet.record", "args": ["after"]}
        )
        schedule.register(spec, now=utcnow() - timedelta(hours=1, seconds=1))
        assert len(schedule.tick().claimed) == 1

        def served() -> bool:
            assert worker.poll() is None, f"the worker died:\n{procs.log('w')[-3000:]}"
            return redis_client.lrange("fleet:effects", 0, -1) == [b"after"]

        wait_for(served, 60, 0.2, "the next run and its fleet task to run")
        wait_for(lambda: schedule.store.list_runs(SCOPE, state="completed"), 30, 0.2, "the run to complete")
        wait_for(lambda: len(dead_letters(redis_client)) >= 2 * len(RAW) + 3, 30, 0.2, "every dead letter")

        assert worker.poll() is None
        log = procs.log("w")
        assert "Unrecoverable error" not in log
        dead = dead_letters(redis_client)
        got = Counter((d["headers"]["x-alma-queue"], base64.b64decode(d["body"])) for d in dead)
        pidbox = [q for q, _raw in got if q not in QUEUES]
        assert len(set(pidbox)) == 1 and pidbox[0].endswith(".celery.pidbox"), got
        want = Counter((q, item) for q in QUEUES for item in RAW) + Counter((pidbox[0], item) for item in RAW[:3])
        assert got == want
        assert all(d["headers"]["x-alma-raw"] is True and d["headers"]["x-alma-refused"] for d in dead)
        assert all(d["content-type"] == "application/octet-stream" for d in dead)
        assert log.count("alma_schedule: refused a message on ") == len(dead)
        assert {q: redis_client.llen(q) for q in QUEUES} == dict.fromkeys(QUEUES, 0)
        assert not redis_client.hlen("unacked")
    finally:
        procs.stop_all()
        composition.close()
