"""Atomic ceilings under real concurrency: twenty routines of one org fire at the same instant and
are executed by four processes at once against PostgreSQL; the org ceiling is never exceeded."""

from __future__ import annotations

import multiprocessing
from datetime import timedelta
from typing import Any

import pytest
from governed_support import T0, ListSink, NoDispatch, empty_tables

from alma_schedule.engine import create_schedule
from alma_schedule.model import Ceiling, RoutineSpec, RunKey, Scope
from alma_schedule.runners.governed import (
    HostCaps,
    Prices,
    TurnReceipt,
    TurnRequest,
    create_governed_conversation_runner,
)
from alma_schedule.settings import Settings
from alma_schedule.stores import open_store

pytestmark = [pytest.mark.postgres]

ORG = "org-race"
PRICES = Prices(1_000_000, 1_000_000)
GOAL = "Race"  # 4 + 64 framing tokens: input bound 68; 100 output tokens: hard bound 168
BOUND = 168
ADMITTED = 5
CEILING = ADMITTED * BOUND
PROCESSES = 4
ROUTINES = 20


class SpendsTheBound:
    """Every turn costs exactly its hard bound: the settled spend equals what was reserved."""

    def run_turn(self, request: TurnRequest) -> TurnReceipt:
        return TurnReceipt("ok", f"answer {request.routine_id}", request.max_cost_micros, "s", "t")


def runner() -> Any:
    return create_governed_conversation_runner(
        provider=SpendsTheBound(), sinks=ListSink(), prices=PRICES, host=HostCaps(org_daily_micros=CEILING)
    )


def settings() -> Settings:
    return Settings(clock=lambda: T0)


def worker(url: str, keys: list[tuple[str, str, str, str]], barrier: Any) -> None:
    store = open_store(url)
    try:
        schedule = create_schedule(store=store, runner=runner(), dispatcher=NoDispatch(), settings=settings())
        barrier.wait(timeout=60)
        for key in keys:
            schedule.execute(RunKey(*key))
    finally:
        store.close()


def test_twenty_routines_of_one_org_never_exceed_the_org_ceiling(governed_pg_url: str) -> None:
    empty_tables(governed_pg_url)
    store = open_store(governed_pg_url)
    try:
        schedule = create_schedule(store=store, runner=runner(), dispatcher=NoDispatch(), settings=settings())
        for i in range(ROUTINES):
            scope = Scope(ORG, f"user-{i % 4}")
            schedule.register(
                RoutineSpec(
                    scope.org,
                    scope.uid,
                    f"r{i:02d}",
                    "turn",
                    {"cron": "* * * * *"},
                    {
                        "goal": GOAL,
                        "budget": {"max_output_tokens": 100},
                    },
                ),
                now=T0 - timedelta(minutes=2),
            )
        report = schedule.tick(now=T0)
        claimed = [tuple(k.args()) for k in report.claimed]
        assert len(claimed) == ROUTINES  # all fire at the same instant
    finally:
        store.close()

    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(PROCESSES)
    procs = [
        ctx.Process(target=worker, args=(governed_pg_url, claimed[i::PROCESSES], barrier)) for i in range(PROCESSES)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0] * PROCESSES

    store = open_store(governed_pg_url)
    try:
        runs = [r for i in range(4) for r in store.list_runs(Scope(ORG, f"user-{i}"), limit=100)]
        outcomes = sorted((r.state, r.reason) for r in runs)
        assert outcomes.count(("completed", "delivered")) == ADMITTED
        assert outcomes.count(("refused", "ceiling_reached")) == ROUTINES - ADMITTED
        spend = store.spend(Ceiling.org_key(ORG), T0.date().isoformat())
        assert spend == sum(r.cost_micros for r in runs) == CEILING
        assert all(r.reserved_micros == 0 for r in runs)
    finally:
        store.close()
