"""Issue 14, defect 2, through a real prefork worker: Celery's soft time limit strikes DURING the
provider call (the fake server bills, then holds the answer). 0.1.0 ended such a run
``failed(provider_error)`` at cost 0 with its reservation released; now it stays ``running``, its
whole bound as its cost and still reserved, blocked at once, listed by ``runs stuck``.

The worker is a subprocess (``celery worker``, prefork: soft time limits need a pool child) on the
real Redis, the store the real PostgreSQL, the provider the real OpenAI adapter over HTTP to the
fake server in this process.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from celery_support import ALMA, Procs, alma_env, make_settings, wait_for, wait_worker_ready

from alma_schedule.celery import create_app
from alma_schedule.model import RoutineSpec, RunKey, Scope
from alma_schedule.runners.adapters.openai import TokenPrices
from alma_schedule.settings import Secret
from alma_schedule.stores import migrate_store
from alma_schedule.tasks import composition_of
from alma_schedule.testing.fake_openai import FakeOpenAI
from alma_schedule.testing.servers import serve_asgi

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.redis]

SCOPE = Scope("acme", "soft")
API_KEY = "sk-test-soft-limit-0001"
PRICE_IN, PRICE_OUT = 150_000, 600_000
CEILING = 10_000


@pytest.fixture
def fake() -> Iterator[tuple[FakeOpenAI, str]]:
    fake = FakeOpenAI(api_key=API_KEY)
    with serve_asgi(fake.app) as server:
        yield fake, server.url


def test_a_soft_time_limit_during_the_call_keeps_the_bound_and_blocks_at_once(
    pg_url: str, redis_url: str, tmp_path: Path, fake: tuple[FakeOpenAI, str]
) -> None:
    provider, url = fake
    provider.stall_next(seconds=120, billed=True)  # bills, then holds the answer past the soft limit
    migrate_store(pg_url)
    sink = tmp_path / "out.jsonl"
    settings = make_settings(
        pg_url,
        redis_url,
        provider="openai",
        openai_base_url=url,
        openai_api_key=Secret(API_KEY),
        openai_timeout=timedelta(seconds=120),
        price_input_per_mtok_micros=PRICE_IN,
        price_output_per_mtok_micros=PRICE_OUT,
        ceiling_org_daily_micros=CEILING,
        sink=f"file:{sink}",
        run_time_limit=timedelta(seconds=2),
    )
    composition = composition_of(create_app(settings))
    assert composition is not None
    schedule = composition.schedule()
    spec = RoutineSpec(SCOPE.org, SCOPE.uid, "brief", "turn", {"cron": "0 8 * * *"},
                       {"goal": "Morning briefing", "budget": {"max_output_tokens": 4000}})  # fmt: skip
    schedule.register(spec)
    env = alma_env(
        settings,
        tmp_path,
        ALMA_PROVIDER="openai",
        ALMA_OPENAI_BASE_URL=url,
        ALMA_OPENAI_API_KEY=API_KEY,
        ALMA_OPENAI_TIMEOUT="120s",
        ALMA_PRICE_INPUT_PER_MTOK_MICROS=str(PRICE_IN),
        ALMA_PRICE_OUTPUT_PER_MTOK_MICROS=str(PRICE_OUT),
        ALMA_CEILING_ORG_DAILY_MICROS=str(CEILING),
        ALMA_SINK=f"file:{sink}",
        ALMA_RUN_TIME_LIMIT="2s",
    )
    procs = Procs(tmp_path)
    try:
        procs.worker("w", env, settings.run_queue, 1)
        wait_worker_ready(procs, "w")
        key = schedule.trigger(SCOPE, "brief").key
        store = schedule.store

        def blocked() -> Any:
            rec = store.get(RunKey.of(key.scope, key.routine_id, key.run_id))
            return rec if rec is not None and rec.blocked_why is not None else None

        rec = wait_for(blocked, 90, 0.1, "the run to be blocked by its soft time limit")
        assert (rec.state, rec.blocked_why) == ("running", "uncertain_outcome")
        assert rec.cost_micros > 0 and rec.cost_micros == rec.reserved_micros  # the whole bound, still held
        assert "SoftTimeLimitExceeded" in procs.log("w")
        assert len(provider.billed) == 1  # the fake did the work and billed it
        billed = TokenPrices(PRICE_IN, PRICE_OUT).cost_micros(*provider.billed[0])
        assert billed <= rec.cost_micros
        assert key in schedule.tick().blocked
        out = procs.start("stuck", [ALMA, "runs", "stuck", "--json"], env)
        assert out.wait(60) == 0
        (row,) = json.loads(procs.log("stuck"))
        assert (row["run_id"], row["why"], row["cost_micros"]) == (key.run_id, "uncertain_outcome", rec.cost_micros)
        assert not sink.exists() or sink.read_text() == ""  # nothing delivered
        assert provider.calls_to("/v1/chat/completions") and len(provider.calls_to("/v1/chat/completions")) == 1
    finally:
        procs.stop_all()
        schedule.store.close()
