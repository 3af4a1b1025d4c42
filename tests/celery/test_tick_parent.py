"""Every run message a tick sends names the tick task as its parent (``parent_id``, ``root_id``: the
trail Flower shows), whichever thread of the tick sent it: past a full first batch the claim batches
run on the tick's own threads (alma_schedule/engine/claims.py), where Celery's current task is not
set; the dispatcher carries the tick's into them."""

from __future__ import annotations

from datetime import timedelta

import pytest
import redis
from celery_support import Recorder, make_settings, utcnow
from test_dispatcher import messages

from alma_schedule.celery import create_app
from alma_schedule.model import TICK_TASK, RoutineSpec, Scope
from alma_schedule.runners.registry import KindRegistry
from alma_schedule.stores import migrate_store
from alma_schedule.tasks import composition_of

pytestmark = [pytest.mark.redis, pytest.mark.postgres]

SCOPE = Scope("acme", "trail")


def test_every_run_message_of_a_tick_in_batches_names_the_tick_as_its_parent(pg_url: str, redis_url: str) -> None:
    migrate_store(pg_url)
    settings = make_settings(pg_url, redis_url, claim_limit=3, run_batch_size=1, tick_claim_workers=2)
    registry = KindRegistry(settings, builtins=False, use_entry_points=False, factories={"noop": lambda s: Recorder()})
    app = create_app(settings, registry=registry)
    composition = composition_of(app)
    assert composition is not None
    try:
        schedule = composition.schedule()
        ago = utcnow() - timedelta(hours=1, seconds=1)  # one fire due now, its window open for an hour
        for i in range(12):
            schedule.register(RoutineSpec(SCOPE.org, SCOPE.uid, f"r{i:02d}", "noop", {"every": "1h"}), now=ago)
        result = app.tasks[TICK_TASK].apply()  # as in a worker: the tick is the current task
        assert result.successful(), result.traceback
        sent = messages(redis.Redis.from_url(redis_url), "alma.run")
        assert len(sent) == 12  # four batches of three, the ones past the first on the claim threads
        assert {(m["headers"]["parent_id"], m["headers"]["root_id"]) for m in sent} == {(result.id, result.id)}
    finally:
        composition.close()
