"""End to end through real Celery workers: a ``turn`` and a ``job`` routine served by the REAL adapters.

Everything real except the outside world: PostgreSQL store, Redis broker, a Celery worker (in a
thread of this process, solo pool) consuming the run and collect queues, the kinds built by the
package's own factories from ``ALMA_*``-style settings (``provider=openai``, ``sink=webhook``),
the fake OpenAI-compatible server and a signature-verifying webhook receiver on 127.0.0.1.
Time is a simulated clock handed to the settings (the tick, the run and the collect all read it),
started at the wall clock and moved forward only (Celery drops messages whose absolute ``expires``
is already past); the webhook signature uses the wall clock, as a receiver expects.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest
from adapters_support import API_KEY, PRICE_IN, PRICE_OUT, WEBHOOK_SECRET, expected_cost

from alma_schedule.model import RUN_TASK, TICK_TASK, RoutineSpec, RunRecord, Scope, governed_key
from alma_schedule.model.time import SettableTime, system_time
from alma_schedule.settings import Secret, Settings
from alma_schedule.testing.fake_openai import FakeOpenAI
from alma_schedule.testing.servers import RunningServer, serve_asgi
from alma_schedule.testing.webhook_receiver import WebhookReceiver

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.redis,
    pytest.mark.slow,
    # Celery's Redis result backend calls redis-py's deprecated setex (the ini filter says the same,
    # but addopts' ``-W error`` overrides ini filters; a mark is applied last).
    pytest.mark.filterwarnings("ignore:Call to deprecated setex:DeprecationWarning"),
]

SCOPE = Scope("acme", "ana")
TURN_GOAL = "Write the morning briefing for the platform team: incidents, deploys and reviews"
JOB_GOAL = "Digest of yesterday's support tickets grouped by product area"


def wait_for(predicate: Callable[[], Any], timeout: float = 30.0, what: str = "") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)


@pytest.fixture
def fake() -> Iterator[tuple[FakeOpenAI, RunningServer]]:
    fake = FakeOpenAI(api_key=API_KEY)
    with serve_asgi(fake.app) as server:
        yield fake, server


@pytest.fixture
def receiver() -> Iterator[tuple[WebhookReceiver, RunningServer]]:
    receiver = WebhookReceiver(WEBHOOK_SECRET)
    with serve_asgi(receiver.app) as server:
        yield receiver, server


@pytest.fixture
def world(
    pg_url: str,
    redis_url: str,
    fake: tuple[FakeOpenAI, RunningServer],
    receiver: tuple[WebhookReceiver, RunningServer],
) -> Iterator[dict[str, Any]]:
    from celery import _state
    from celery.contrib.testing.worker import start_worker

    from alma_schedule.celery import create_app
    from alma_schedule.stores import migrate_store
    from alma_schedule.tasks import composition_of

    migrate_store(pg_url)
    clock = SettableTime(system_time().replace(microsecond=0))
    settings = Settings(
        database_url=pg_url,
        broker_url=redis_url,
        result_backend=redis_url,
        provider="openai",
        openai_base_url=fake[1].url,
        openai_api_key=Secret(API_KEY),
        openai_model="fake-model",
        openai_timeout=timedelta(seconds=10),
        price_input_per_mtok_micros=PRICE_IN,
        price_output_per_mtok_micros=PRICE_OUT,
        sink="webhook",
        webhook_url=receiver[1].url + "/alma",
        webhook_secret=Secret(WEBHOOK_SECRET),
        webhook_timeout=timedelta(seconds=10),
        ceiling_org_daily_micros=100_000,
        poll_first=timedelta(minutes=1),
        task_events=False,
        clock=clock,
    )
    app = create_app(settings)
    composition = composition_of(app)
    assert composition is not None
    previous = (_state.default_app, _state._tls.current_app)
    try:
        with start_worker(
            app,
            # The threads pool: provider and webhook calls are I/O. (The solo pool fires
            # worker_process_init in THIS process, where the composition's after-fork disposal
            # would drop the parent's open connections.)
            pool="threads",
            concurrency=2,
            perform_ping_check=False,
            queues=[settings.tick_queue, settings.run_queue, settings.collect_queue],
            loglevel="WARNING",
            shutdown_timeout=30,
        ):
            yield {
                "app": app,
                "settings": settings,
                "schedule": composition.schedule(),
                "clock": clock,
                "fake": fake[0],
                "receiver": receiver[0],
            }
    finally:
        _state.default_app, _state._tls.current_app = previous
        composition.close()


def tick(world: dict[str, Any], at: datetime) -> dict[str, Any]:
    """Move the clock, then one tick through Celery (its report)."""
    world["clock"].set(at)
    result = world["app"].tasks[TICK_TASK].apply_async(kwargs={"now": at.isoformat()})
    report: dict[str, Any] = result.get(timeout=30)
    result.forget()
    return report


def run_of(world: dict[str, Any], routine_id: str) -> RunRecord | None:
    runs = world["schedule"].runs(SCOPE, routine_id=routine_id)
    return runs[0] if runs else None


def settled(world: dict[str, Any], routine_id: str, states: set[str]) -> RunRecord | None:
    run = run_of(world, routine_id)
    return run if run is not None and run.state in states else None


def test_turn_and_job_routines_through_celery_with_the_real_adapters(world: dict[str, Any]) -> None:
    schedule, fake, receiver = world["schedule"], world["fake"], world["receiver"]
    t0 = world["clock"]()
    brief = schedule.register(
        RoutineSpec(
            SCOPE.org,
            SCOPE.uid,
            "briefing",
            "turn",
            {"every": "1d"},
            {"goal": TURN_GOAL, "budget": {"per_turn_usd": 0.002, "max_output_tokens": 12}},
        ),
        now=t0,
    )
    digest = schedule.register(
        RoutineSpec(
            SCOPE.org,
            SCOPE.uid,
            "digest",
            "job",
            {"every": "1d"},
            {"goal": JOB_GOAL, "budget": {"per_run_usd": 0.003}},
        ),
        now=t0,
    )

    # The first fire of both: the turn completes in its run; the job is submitted.
    fire = brief.next_fires[0]
    assert digest.next_fires[0] == fire > t0
    report = tick(world, fire + timedelta(seconds=5))
    assert report["claimed"] == 2
    turn = wait_for(lambda: settled(world, "briefing", {"completed", "failed", "refused"}), what="the turn")
    job = wait_for(lambda: settled(world, "digest", {"submitted", "failed", "refused"}), what="the submit")
    assert (turn.state, turn.reason) == ("completed", "delivered")
    assert job.state == "submitted" and job.batch_id

    # The turn: max_tokens came from the routine's bound, cost = the fake's usage x the prices.
    (chat,) = fake.calls_to("/v1/chat/completions")
    assert chat.json["max_tokens"] == 12
    assert chat.json["messages"] == [{"role": "user", "content": TURN_GOAL}]
    assert chat.response["choices"][0]["finish_reason"] == "length"
    assert chat.headers["x-client-request-id"] == governed_key(SCOPE, "briefing", turn.run_id)
    assert turn.cost_micros == expected_cost(chat.response["usage"]) > 0

    # The job: pending on the first collect, succeeded on the next; delivered by the collector.
    report = tick(world, fire + timedelta(minutes=2))
    assert report["collect"] == 1
    wait_for(lambda: len(fake.calls_to("/v1/batches/")) == 1, what="the first poll")
    assert wait_for(lambda: run_of(world, "digest")).state == "submitted"
    for minutes in (10, 30, 60, 120):
        if settled(world, "digest", {"completed", "failed", "timed_out"}):
            break
        tick(world, fire + timedelta(minutes=minutes))
        time.sleep(0.3)
    job = wait_for(lambda: settled(world, "digest", {"completed", "failed", "timed_out"}), what="the collect")
    assert (job.state, job.reason) == ("completed", "delivered")
    output_id = fake.batch(job.batch_id)["output_file_id"]
    output = json.loads(fake._files[output_id][1])
    assert job.cost_micros == expected_cost(output["response"]["body"]["usage"]) > 0

    # Each fire delivered once, signed and verified, keyed by its governed key, with the ledger's cost.
    deliveries = wait_for(lambda: len(receiver.deliveries) == 2 and receiver.deliveries, what="deliveries")
    assert all(r.verified for r in receiver.received) and len(receiver.received) == 2
    by_routine = {r.json["routine_id"]: r for r in deliveries}
    for run, kind in ((turn, "turn"), (job, "job")):
        got = by_routine[run.routine_id]
        assert got.idempotency_key == governed_key(SCOPE, run.routine_id, run.run_id)
        assert got.json["run_id"] == run.run_id and got.json["kind"] == kind
        assert got.json["cost_micros"] == run.cost_micros
        assert got.json["text"] == run.result_text != ""
    assert by_routine["briefing"].json["text"] == chat.response["choices"][0]["message"]["content"]

    # A duplicate run message and more ticks change nothing: no second call, charge or delivery.
    for run in (turn, job):
        world["app"].tasks[RUN_TASK].apply_async(args=[SCOPE.org, SCOPE.uid, run.routine_id, run.run_id])
    tick(world, fire + timedelta(hours=3))
    tick(world, fire + timedelta(hours=3))
    time.sleep(1.0)
    assert len(receiver.received) == 2
    assert len(fake.calls_to("/v1/chat/completions")) == 1
    assert len(fake.calls_to("/v1/batches")) == len(fake.calls_to("/v1/batches/")) + 1  # one creation
    again = {r.routine_id: r for r in (run_of(world, "briefing"), run_of(world, "digest")) if r}
    assert again["briefing"].cost_micros == turn.cost_micros
    assert again["digest"].cost_micros == job.cost_micros

    # The API key reached the fake in headers only: never the ledger, the routines or a delivery.
    ledger = json.dumps([r.to_dict() for r in schedule.runs(SCOPE, limit=100)])
    routines = json.dumps([r.to_dict() for r in schedule.routines(SCOPE)], default=str)
    assert API_KEY not in ledger and API_KEY not in routines
    assert all(API_KEY not in r.body.decode() for r in receiver.received)
    assert all(c.headers.get("authorization") == f"Bearer {API_KEY}" for c in fake.calls)
