"""``alma_schedule.run_many``: packed fires, each started on its own; expired fires left for the
sweep; a slow fire makes the unstarted ones leave as single ``run`` messages after the budget."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import pytest
import redis
from celery_support import Recorder, inprocess_worker, make_settings, utcnow, wait_for
from test_dispatcher import messages

from alma_schedule.celery import create_app
from alma_schedule.engine import create_schedule
from alma_schedule.errors import InvalidInput
from alma_schedule.model import RUN_TASK, RoutineSpec, RunKey, RunRecord, RunResult, Scope
from alma_schedule.runners.registry import KindRegistry
from alma_schedule.stores import migrate_store
from alma_schedule.tasks import batch, composition_of
from alma_schedule.tasks.batch import run_batch, unpack

pytestmark = pytest.mark.redis
SCOPE = Scope("acme", "batch")


class Budget:
    """Stands in for the ``run_many`` watchdog's ``threading.Timer``: the budget elapses when the test
    says so, not after a stretch of wall time (on a loaded machine 0.3 s can pass before the first
    fire even starts, and then every fire would leave)."""

    armed: list[Budget] = []

    def __init__(self, interval: float, function: Callable[[], None]) -> None:
        self.interval, self.function = interval, function
        self.daemon = False
        self.cancelled = False
        Budget.armed.append(self)

    def start(self) -> None:
        return None

    def cancel(self) -> None:
        self.cancelled = True

    def elapse(self) -> None:
        """The budget is over: the watchdog runs, in a thread of its own as the real one does."""
        assert not self.cancelled
        watchdog = threading.Thread(target=self.function)
        watchdog.start()
        watchdog.join()


class Slow(Recorder):
    """A fire that runs past the budget of the ``run_many`` message it came in."""

    def run(self, routine: Any, handle: Any) -> RunResult:
        Budget.armed[-1].elapse()
        return super().run(routine, handle)


class Keep:
    """A dispatcher that sends nothing: the test packs the claimed fires itself."""

    def __init__(self) -> None:
        self.runs: list[RunRecord] = []

    def send_runs(self, runs: Sequence[RunRecord]) -> None:
        self.runs.extend(runs)

    def send_collects(self, runs: Sequence[RunRecord]) -> None:
        return None

    def run_queue_depth(self) -> int | None:
        return 0


def packed(record: RunRecord, expires: Any = None) -> list[str]:
    return [*record.key.args(), (expires or record.expires_at).isoformat()]


def test_unpack_refuses_malformed_fires() -> None:
    for bad in ([["a", "b", "c", "d"]], [["a", "b", "c", "d", "soon"]], [["a", "b", "c", "d", "2026-01-01T00:00:00"]]):
        with pytest.raises(InvalidInput):
            unpack(bad)


def test_a_slow_fire_sends_the_unstarted_ones_away_and_expired_ones_are_left_claimed(
    sqlite_url: str, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(batch, "threading", SimpleNamespace(Timer=Budget, Lock=threading.Lock))
    monkeypatch.setattr(Budget, "armed", [])
    migrate_store(sqlite_url)
    settings = make_settings(sqlite_url, redis_url, run_batch_budget=timedelta(seconds=0.3))
    slow, fast = Slow(), Recorder()
    registry = KindRegistry(
        settings, builtins=False, use_entry_points=False, factories={"slow": lambda s: slow, "fast": lambda s: fast}
    )
    app = create_app(settings, registry=registry)
    composition = composition_of(app)
    assert composition is not None
    keep = Keep()
    claimer = create_schedule(store=composition.store(), runner=registry.resolve, dispatcher=keep, settings=settings)
    ago = utcnow() - timedelta(hours=1, seconds=1)  # one fire due now, its window open for an hour
    for rid, kind in (("a-slow", "slow"), ("b-fast", "fast"), ("c-expired", "fast")):
        claimer.register(RoutineSpec(SCOPE.org, SCOPE.uid, rid, kind, {"every": "1h"}), now=ago)
    claimer.tick()
    by_id = {r.routine_id: r for r in keep.runs}
    fires = [
        packed(by_id["a-slow"]),
        packed(by_id["c-expired"], utcnow() - timedelta(seconds=1)),  # its own expiry has passed
        packed(by_id["b-fast"]),
    ]
    r = redis.Redis.from_url(redis_url)
    try:
        result = run_batch(composition, fires)  # no worker: what leaves is visible in Redis
        assert [b.interval for b in Budget.armed] == [0.3]  # the watchdog is armed with run_batch_budget
        assert result == {"fires": 3, "states": {"completed": 1}, "expired": 0, "resent": 2}
        assert [k.routine_id for k in slow.keys] == ["a-slow"] and fast.keys == []
        sent = messages(r, "alma.run")
        assert [m["headers"]["task"] for m in sent] == [RUN_TASK, RUN_TASK]
        assert [m["decoded"][0] for m in sent] == [fires[1][:4], fires[2][:4]]
        store = composition.store()
        assert store.get(RunKey.of(SCOPE, "b-fast", by_id["b-fast"].run_id)).state == "claimed"  # type: ignore[union-attr]

        # without a slow fire: everything runs in the message, the expired fire stays claimed
        r.delete("alma.run")
        calm = run_batch(composition, [fires[1], fires[2]])
        assert calm == {"fires": 2, "states": {"completed": 1}, "expired": 1, "resent": 0}
        assert [k.routine_id for k in fast.keys] == ["b-fast"] and r.llen("alma.run") == 0
        assert store.get(RunKey.of(SCOPE, "c-expired", by_id["c-expired"].run_id)).state == "claimed"  # type: ignore[union-attr]
        again = run_batch(composition, [fires[2]])  # a duplicate message: the CAS says no
        assert again["states"] == {"completed": 1}  # the winner's record, not a second run
        assert [k.routine_id for k in fast.keys] == ["b-fast"]
    finally:
        r.close()
        composition.close()


def test_a_large_tick_through_a_worker_runs_every_fire_once(sqlite_url: str, redis_url: str) -> None:
    migrate_store(sqlite_url)
    settings = make_settings(sqlite_url, redis_url, run_batch_size=4)
    recorder = Recorder()
    registry = KindRegistry(settings, builtins=False, use_entry_points=False, factories={"noop": lambda s: recorder})
    app = create_app(settings, registry=registry)
    composition = composition_of(app)
    assert composition is not None
    schedule = composition.schedule()
    ago = utcnow() - timedelta(hours=1, seconds=1)  # one fire due now, its window open for an hour
    for i in range(10):
        schedule.register(RoutineSpec(SCOPE.org, SCOPE.uid, f"r{i}", "noop", {"every": "1h"}), now=ago)
    try:
        with inprocess_worker(app, ["alma.run"]):
            report = schedule.tick()
            assert len(report.claimed) == 10
            store = composition.store()
            wait_for(lambda: len(store.list_runs(SCOPE, state="completed")) == 10, what="10 completed runs")
        assert sorted(k.routine_id for k in recorder.keys) == sorted(f"r{i}" for i in range(10))
    finally:
        composition.close()
