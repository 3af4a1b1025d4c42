"""Issue 14, defect 2: a failed provider call that may have reached the provider is UNCERTAIN: the run
stays ``running`` with its whole bound as its cost, blocked at once; only the closed list of "the
request never left" failures ends at cost 0. Both governed runners, through the real engine and
real stores (memory, SQLite, PostgreSQL); the provider is the package's ScriptedProvider."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from billiard.exceptions import SoftTimeLimitExceeded
from conversation_support import BOUND, BUDGET, GOAL, ledger_text, make
from governed_support import SCOPE, routine_ceiling
from test_batch import BOUND as JOB_BOUND
from test_batch import GOAL as JOB_GOAL
from test_batch import make as make_job

from alma_schedule.errors import ProviderError
from alma_schedule.model import BlockedWhy
from alma_schedule.model.time import SettableTime
from alma_schedule.runners.governed.outcome import NEVER_LEFT_PHASES, request_never_left

SECRET = "secret-token-123"
NEVER_LEFT = {
    "connect refused / DNS / TLS": ProviderError(f"connect {SECRET}", phase="connect"),
    "pool timeout": ProviderError("pool", reason="provider_timeout", phase="pool"),
    "nothing sent": ProviderError("bound below input", reason="not_admitted", phase="not_sent"),
    "HTTP 429": ProviderError(f"rate limited {SECRET}", status_code=429),
    "HTTP 401": ProviderError("bad key", status_code=401),
}
UNCERTAIN = {
    "read timeout": ProviderError(f"timed out {SECRET}", reason="provider_timeout"),
    "HTTP 504": ProviderError("gateway", status_code=504),
    "HTTP 500": ProviderError("server", status_code=500),
    "HTTP 408": ProviderError("request timeout", status_code=408, phase="connect"),  # the status decides
    "a reset (no facts)": ProviderError(f"reset {SECRET}"),
    "a foreign exception": RuntimeError(f"socket {SECRET}"),
    "a Celery soft time limit": SoftTimeLimitExceeded(),
}


def test_the_closed_list() -> None:
    assert NEVER_LEFT_PHASES == {"connect", "pool", "not_sent"}
    assert all(request_never_left(exc) for exc in NEVER_LEFT.values())
    assert not any(request_never_left(exc) for exc in UNCERTAIN.values())
    assert not request_never_left(ProviderError("x", phase="elsewhere"))


@pytest.mark.parametrize("name", list(NEVER_LEFT))
def test_a_turn_that_never_left_fails_at_zero(store: Any, clock: SettableTime, name: str) -> None:
    exc = NEVER_LEFT[name]
    h, provider, sink, _, errors = make(store, clock, [exc])
    h.register("brief", goal=GOAL, budget=BUDGET)
    key = h.fire("brief")
    rec = h.schedule.execute(key)
    assert (rec.state, rec.error_class, rec.cost_micros, rec.blocked_why) == ("failed", "ProviderError", 0, None)
    assert rec.reason == exc.reason if exc.reason != "not_admitted" else rec.reason == "provider_error"
    assert h.spend(routine_ceiling("brief")) == 0 and sink.attempts == 0
    assert SECRET not in ledger_text(h, key) and errors[0][2] == key
    h.schedule.execute(key)
    assert provider.count("run_turn") == 1


@pytest.mark.parametrize("name", list(UNCERTAIN))
def test_an_uncertain_turn_stays_running_at_its_bound_blocked_at_once(
    store: Any, clock: SettableTime, name: str
) -> None:
    exc = UNCERTAIN[name]
    h, provider, sink, _, errors = make(store, clock, [exc])
    h.register("brief", goal=GOAL, budget=BUDGET)
    key = h.fire("brief")
    rec = h.schedule.execute(key)
    assert (rec.state, rec.blocked_why, rec.blocked_at) == ("running", "uncertain_outcome", clock())
    assert (rec.cost_micros, rec.reserved_micros) == (BOUND, BOUND)
    assert h.spend(routine_ceiling("brief")) == BOUND  # the ceiling sees the bound
    assert SECRET not in ledger_text(h, key) and errors[0][2] == key and sink.attempts == 0
    report = h.schedule.tick()  # blocked at once, not after 2 x run_time_limit
    assert (report.blocked, report.blocked_why) == ((key,), (BlockedWhy.UNCERTAIN_OUTCOME,))
    assert h.schedule.execute(key).state == "running"  # nothing retries it
    clock.advance(timedelta(hours=1))
    h.schedule.tick()
    assert provider.count("run_turn") == 1 and h.get(key).state == "running"
    done = h.schedule.record(SCOPE, "brief", key.run_id, "failed", "provider_error")
    assert done.won and done.record is not None and done.record.cost_micros == BOUND
    assert h.spend(routine_ceiling("brief")) == BOUND  # settled at the recorded cost: the bound


@pytest.mark.parametrize("name", ["connect refused / DNS / TLS", "HTTP 429", "nothing sent"])
def test_a_job_whose_batch_was_never_created_fails_at_zero(store: Any, clock: SettableTime, name: str) -> None:
    h, provider, _, _, _ = make_job(store, clock, submits=[NEVER_LEFT[name]])
    h.register("digest", "job", goal=JOB_GOAL, budget=BUDGET)
    rec = h.schedule.execute(h.fire("digest"))
    assert (rec.state, rec.cost_micros, rec.blocked_why) == ("failed", 0, None)
    assert h.spend(routine_ceiling("digest")) == 0 and provider.count("submit") == 1


@pytest.mark.parametrize("name", ["read timeout", "HTTP 504", "a reset (no facts)", "a Celery soft time limit"])
def test_an_uncertain_submission_stays_running_at_its_bound_blocked_at_once(
    store: Any, clock: SettableTime, name: str
) -> None:
    h, provider, _, _, _ = make_job(store, clock, submits=[UNCERTAIN[name]])
    h.register("digest", "job", goal=JOB_GOAL, budget=BUDGET)
    key = h.fire("digest")
    rec = h.schedule.execute(key)
    assert (rec.state, rec.batch_id, rec.blocked_why) == ("running", None, "uncertain_outcome")
    assert (rec.cost_micros, rec.reserved_micros) == (JOB_BOUND, JOB_BOUND)
    assert h.spend(routine_ceiling("digest")) == JOB_BOUND
    assert key in h.schedule.tick().blocked
    h.schedule.execute(key)
    assert provider.count("submit") == 1  # never submitted anew
