"""Round trips of the run side, per fire, counted in-process on our own connections.

The engine's ``execute`` (what the ``alma_schedule.run`` task calls, with an owner and
``time.sleep``) over a PostgreSQL store, for one manual fire at a time of a routine of each kind:

* ``trivial``: a runner that returns ``completed(ok)`` without touching its handle;
* ``task``: the shipped ``task`` runner (untracked: one Celery send to Redis, no store write);
* ``turn``: the shipped governed conversation runner over the scripted provider and a file sink
  (reserve, annotate, deliver, finish: the writes its seeds require);
* ``run_many``: ``--fires`` fires of ``trivial`` routines executed by ``run_batch`` (the packed
  message's body), per fire.

PostgreSQL round trips are libpq's own trace (``PQtrace``, :class:`round_trips.PgCounter`): each
frontend ``Query`` or ``Sync`` is one. The claims are made before counting (untimed, uncounted).

    .venv/bin/python bench/run_trips.py
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from round_trips import PgCounter, redis_url
from store_load import scratch_database

from alma_schedule.engine import create_scheduler
from alma_schedule.model import Routine, RoutineSpec, RunHandle, RunKey, RunRecord, RunResult, Scope
from alma_schedule.policies.ownership import owner_of
from alma_schedule.settings import Settings
from alma_schedule.stores.sql import SqlStore

SCOPE = Scope("org-a", "user-1")


class Trivial:
    kind = "trivial"

    def validate(self, routine: Routine) -> None:
        return None

    def run(self, routine: Routine, handle: RunHandle) -> RunResult:
        return RunResult.completed()


class Recorder:
    """A dispatcher that sends nothing (the fires are executed here)."""

    def send_runs(self, runs: Sequence[RunRecord]) -> None:
        return None

    def send_collects(self, runs: Sequence[RunRecord]) -> None:
        return None

    def run_queue_depth(self) -> int | None:
        return 0


def _runners(broker: str, tmp: str) -> dict[str, Any]:
    from celery import Celery

    from alma_schedule.runners.governed.factory import turn_runner_from_settings
    from alma_schedule.runners.task import TaskRunner

    fleet = Celery("bench_fleet", broker=broker, set_as_current=False)

    def noop() -> None:
        return None

    fleet.task(name="bench.noop", ignore_result=True)(noop)
    governed = Settings(provider="scripted", sink=f"file:{tmp}/sink.txt")
    return {"trivial": Trivial(), "task": TaskRunner(fleet), "turn": turn_runner_from_settings(governed)}


DEFINITIONS: dict[str, dict[str, Any]] = {
    "trivial": {},
    "task": {"task": "bench.noop"},
    "turn": {"goal": "Brief me", "budget": {"max_output_tokens": 50}},
}


def count(fires: int, warm: int) -> dict[str, Any]:
    url_redis, lock = redis_url()
    out: dict[str, Any] = {"fires": fires}
    try:
        with scratch_database() as (url, _conninfo), tempfile.TemporaryDirectory() as tmp:
            store = SqlStore(url)
            runners = _runners(url_redis, tmp)
            settings = Settings(broker_url=url_redis)
            schedule = create_scheduler(
                store=store, runner=lambda r: runners[r.kind], dispatcher=Recorder(), settings=settings
            )
            pg = PgCounter(store.engine)
            for kind, definition in DEFINITIONS.items():
                for i in range(fires):
                    spec = RoutineSpec(SCOPE.org, SCOPE.uid, f"{kind}-{i}", kind, {"cron": "0 8 * * *"}, definition)
                    schedule.register(spec)

            def fire(kind: str, i: int) -> RunKey:
                return schedule.trigger(SCOPE, f"{kind}-{i}").key

            def per_fire(kind: str, execute: Callable[[list[RunKey]], list[str]]) -> dict[str, Any]:
                execute([fire(kind, i) for i in range(warm)])  # prepared statements, pools, imports
                keys = [fire(kind, i) for i in range(fires)]
                pg.trace.seek(0)
                pg.trace.truncate()
                pg.on = True
                states = execute(keys)
                pg.on = False
                trips = pg.round_trips()
                return {
                    "pg_round_trips_per_fire": (trips["Query"] + trips["Sync"]) / fires,
                    "pg_simple_queries_per_fire": trips["Query"] / fires,
                    "states": sorted(set(states)),
                }

            def single(keys: list[RunKey]) -> list[str]:
                return [schedule.execute(k, owner=owner_of(f"req-{k.run_id}"), sleep=time.sleep).state for k in keys]

            for kind in DEFINITIONS:
                out[kind] = per_fire(kind, single)
            out["run_many"] = per_fire("trivial", _packed(schedule, settings))
            store.close()
    finally:
        import redis

        redis.Redis.from_url(url_redis).flushdb()
        lock.delete(f"alma-test-db-lock:{url_redis.rsplit('/', 1)[1]}")
    return out


def _packed(schedule: Any, settings: Settings) -> Callable[[list[RunKey]], list[str]]:
    """``run_batch`` over the fires (one message's body) through a minimal composition."""
    from alma_schedule.tasks.batch import run_batch

    class Comp:
        app = None

        def __init__(self) -> None:
            self.settings = settings

        def schedule(self) -> Any:
            return schedule

    def run(keys: list[RunKey]) -> list[str]:
        far = "2999-01-01T00:00:00+00:00"
        report = run_batch(Comp(), [[*k.args(), far] for k in keys], request_id="req-many")  # type: ignore[arg-type]
        return [s for s, n in report["states"].items() for _ in range(n)]

    return run


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fires", type=int, default=20)
    ap.add_argument("--warm", type=int, default=6)
    args = ap.parse_args(argv)
    print(json.dumps(count(args.fires, args.warm), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
