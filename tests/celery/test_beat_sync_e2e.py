"""Issue 47's "Done when", the sync half: a fleet keeps its ``beat_schedule`` in code and beat syncs it.

A fleet project outside the package (``fleet.py`` in tmp_path: a Celery app on a Redis db of this test,
one task recording each execution, a ``beat_schedule`` of a crontab every minute, intervals of 2 s and
3 s and a custom schedule class) adds ``install(app, beat_clock=True)`` and ``alma_database_url`` (a
TCP proxy in front of this test's PostgreSQL database, so the store can go down), runs ``alma-schedule
-A fleet migrate``, starts the two workers and ``celery -A fleet beat``. Then: every synced fire runs
once (the custom entry runs from beat); a changed and a removed entry after a restart; an operator's
pause survives a restart; three beats at once; a beat started with the store down runs no synced
entry itself and syncs once the store is back. Counts and order only: no duration is asserted.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import redis
from celery_support import CELERY, Procs, wait_for, wait_worker_ready
from fleet_project import alma, clean_env

from alma_schedule.model import RunKey
from alma_schedule.runners.task import task_id_for
from tests.stores.tcp_proxy import TcpProxy, tcp_proxy

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]

SCOPE = "beat/fleet"
TERMINAL = ("completed", "failed", "refused", "skipped", "timed_out")

FLEET = """\
import json
from datetime import timedelta

import redis
from celery import Celery
from celery.schedules import BaseSchedule, crontab, schedstate

from alma_schedule.celery import install


class EveryFive(BaseSchedule):
    \"\"\"A custom schedule class: it cannot convert, so it stays with beat.\"\"\"

    def is_due(self, last_run_at):
        left = 5 - (self.now() - last_run_at).total_seconds()
        return schedstate(True, 5.0) if left <= 0 else schedstate(False, left)

    def remaining_estimate(self, last_run_at):
        return timedelta(seconds=5)


app = Celery("fleet", broker={broker!r}, backend={broker!r})
app.conf.update(timezone="UTC", beat_schedule={{
{entries}
}})
app.conf.alma_database_url = {store!r}
effects = redis.Redis.from_url({broker!r})


@app.task(name="fleet.record", bind=True)
def record(self, entry):
    effects.rpush("fleet:effects", json.dumps([entry, self.request.id]))


install(app, beat_clock=True)
"""

ENTRIES = {
    "minutely": 'crontab(), "args": ["minutely"]',
    "every-2s": 'timedelta(seconds=2), "args": ["every-2s"]',
    "every-3s": 'timedelta(seconds=3), "args": ["every-3s"]',
    "every-3s-now-4s": 'timedelta(seconds=4), "args": ["every-3s"]',
    "every-5s": 'timedelta(seconds=5), "args": ["every-5s"]',
    "custom": 'EveryFive(), "args": ["custom"]',
}


class Fleet:
    def __init__(self, root: Path, pg_url: str, redis_url: str, proxy: TcpProxy) -> None:
        self.root, self.redis_url, self.proxy = root, redis_url, proxy
        self.store_url = proxy.url(pg_url)
        self.env = clean_env()  # the fleet's processes: the store named by its module only
        self.cli_env = clean_env(ALMA_DATABASE_URL=pg_url)  # the test's reads: past the proxy
        self.procs = Procs(root)
        self.r = redis.Redis.from_url(redis_url)
        self.beats = 0
        self.stopped: set[str] = set()

    def write(self, **names: str) -> None:
        """``fleet.py`` with the entries ``name=ENTRIES key``."""
        lines = "\n".join(f'    "{n}": {{"task": "fleet.record", "schedule": {ENTRIES[k]}}},' for n, k in names.items())
        text = FLEET.format(broker=self.redis_url, entries=lines, store=self.store_url)
        (self.root / "fleet.py").write_text(text)
        for cached in self.root.glob("__pycache__/fleet.*"):
            cached.unlink()

    def alma(self, *args: str) -> str:
        done = alma(self.root, "-A", "fleet", *args, env=self.cli_env)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    def routine(self, rid: str) -> dict[str, Any]:
        return json.loads(self.alma("routines", "show", SCOPE, rid, "--json"))  # type: ignore[no-any-return]

    def ledger(self) -> list[dict[str, Any]]:
        return json.loads(self.alma("runs", "list", SCOPE, "--json", "--limit", "10000"))  # type: ignore[no-any-return]

    def effects(self) -> list[tuple[str, str]]:
        return [tuple(json.loads(e)) for e in self.r.lrange("fleet:effects", 0, -1)]  # type: ignore[misc]

    def ran(self, entry: str) -> int:
        return sum(1 for e, _ in self.effects() if e == entry)

    def start(self, name: str, *args: str) -> None:
        self.procs.start(name, [CELERY, "-A", "fleet", *args, "--loglevel", "INFO"], self.env, cwd=self.root)

    def beat(self) -> str:
        self.beats += 1
        name = f"beat{self.beats}"
        self.start(name, "beat", "--schedule", str(self.root / f"{name}-schedule"))
        return name

    def stop(self, name: str) -> None:
        assert self.procs.stop(dict(self.procs.procs)[name], 60) == 0, self.procs.log(name)[-3000:]
        self.stopped.add(name)

    def alive(self) -> None:
        for name, proc in self.procs.procs:
            if name in self.stopped:
                continue
            assert proc.poll() is None, f"{name} exited {proc.returncode}:\n{self.procs.log(name)[-3000:]}"

    def wait(self, check: Any, what: str, timeout: float = 150) -> None:
        """Poll ``check`` (the processes alive), failing with what ran and the logs' tails."""
        try:
            wait_for(lambda: self.alive() or check(), timeout, 0.5, what)
        except AssertionError:
            ran = Counter(e for e, _ in self.effects())
            logs = "\n".join(f"--- {n}\n{self.procs.log(n)[-2500:]}" for n, _ in self.procs.procs)
            raise AssertionError(f"{what}: ran {dict(ran)}\n{logs}") from None

    def synced(self, name: str, marker: str = "of fleet synced into beat/fleet") -> None:
        wait_for(lambda: self.alive() or marker in self.procs.log(name), 90, 0.2, f"{name}: {marker}")

    def idle(self) -> bool:
        queued = sum(int(self.r.llen(q)) for q in ("alma.tick", "alma.run", "alma.collect"))
        return queued == 0 and all(run["state"] in TERMINAL for run in self.ledger())

    def task_ids(self, runs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
        return {task_id_for(RunKey("beat", "fleet", run["routine_id"], run["run_id"])): run for run in runs}

    def check_once_per_fire(self) -> Counter[str]:
        """Every synced fire's task ran once, and beat sent none of them itself; per routine, the runs.
        (A beat may still be running: effects are read before the ledger they must all be in.)"""
        wait_for(self.idle, 90, 1, "every run to end")
        sent = {t for t, run in self.task_ids(self.ledger()).items() if run["state"] == "completed"}
        wait_for(lambda: sent <= {t for _, t in self.effects()}, 90, 0.5, "every sent run's task to run")
        effects = [(e, tid) for e, tid in self.effects() if e != "custom"]
        runs = self.ledger()  # after the effects: a run's row exists before its task is sent
        ids = self.task_ids(runs)
        counts = Counter(tid for _, tid in effects)
        assert all(n == 1 for n in counts.values()), [e for e in effects if counts[e[1]] > 1]
        outside = [e for e in effects if e[1] not in ids]
        assert not outside, f"synced entries ran outside the ledger (from beat itself?): {outside}"
        fires = Counter((r["routine_id"], r["fire_at"]) for r in runs if r["origin"] == "schedule")
        assert all(n == 1 for n in fires.values())
        return Counter(r["routine_id"] for r in runs)


@pytest.fixture
def fleet(tmp_path: Path, pg_url: str, redis_url: str) -> Any:
    root = tmp_path / "proj"
    root.mkdir()
    with tcp_proxy(("127.0.0.1", 5432)) as proxy:
        f = Fleet(root, pg_url, redis_url, proxy)
        f.write(**{"minutely": "minutely", "every-2s": "every-2s", "every-3s": "every-3s", "custom": "custom"})
        try:
            done = alma(root, "-A", "fleet", "migrate", env=f.env)  # the URL the fleet's module names
            assert done.returncode == 0, done.stdout + done.stderr
            f.start("tick", "worker", "-Q", "alma.tick", "-c", "1", "-n", "tick@%h")
            f.start("run", "worker", "-Q", "alma.run,alma.collect,celery", "-n", "run@%h")
            wait_worker_ready(f.procs, "tick", 60)
            wait_worker_ready(f.procs, "run", 60)
            yield f
        finally:
            f.procs.stop_all()
            f.r.close()


def test_the_schedule_stays_in_code_and_beat_syncs_it(fleet: Fleet) -> None:
    f = fleet
    # 1. the first beat: every entry runs, the synced ones once per fire, the custom one from beat
    first = f.beat()
    f.synced(first)
    log = f.procs.log(first)
    assert "stay in beat: custom (" in log and "4 create" not in log and "3 create" in log, log[-3000:]
    f.wait(lambda: f.ran("minutely") >= 1 and f.ran("every-2s") >= 3 and f.ran("custom") >= 1, "every entry to run")
    f.check_once_per_fire()
    routine = f.routine("every-2s")
    assert (routine["source"], routine["source_entry"], routine["kind"]) == ("beat-sync:fleet", "every-2s", "task")
    # 2. a changed entry and a removed one, then a restart
    f.stop(first)
    f.write(**{"minutely": "minutely", "every-3s": "every-3s-now-4s", "custom": "custom"})
    second = f.beat()
    f.synced(second)
    removed = f.routine("every-2s")
    assert removed["enabled"] is False and removed["disabled_reason"] == "removed from beat_schedule"
    assert f.check_once_per_fire()["every-2s"] >= 3  # its ledger stays
    assert f.routine("every-3s")["schedule"]["every"] == "4s"
    listed = {r["routine_id"]: r for r in json.loads(f.alma("routines", "list", SCOPE, "--json"))}
    assert listed["every-3s"]["source_entry"] == "every-3s" and listed["every-2s"]["state"] == "disabled"
    # 3. an operator's pause survives a restart (and the sync)
    f.alma("routines", "pause", SCOPE, "every-3s", "--reason", "ops-hold")
    f.stop(second)
    third = f.beat()
    f.synced(third)
    assert f.routine("every-3s")["paused_reason"] == "ops-hold"
    f.alma("routines", "resume", SCOPE, "every-3s")
    # 4. three beats at once: each syncs (no error, nothing written twice), every fire once
    f.stop(third)
    before = f.ran("every-3s")
    beats = [f.beat() for _ in range(3)]
    for name in beats:
        f.synced(name)
        assert "Traceback" not in f.procs.log(name)
    f.wait(lambda: f.ran("every-3s") >= before + 3, "every-3s under three beats")
    for name in beats:
        f.stop(name)
    listed = {r["routine_id"]: r["source"] for r in json.loads(f.alma("routines", "list", SCOPE, "--json"))}
    assert listed == dict.fromkeys(("every-2s", "every-3s", "minutely"), "beat-sync:fleet")  # none written twice
    f.check_once_per_fire()
    # 5. beat starts with the store down: it runs, sends no synced entry itself, and syncs once it is back
    f.write(**{"minutely": "minutely", "every-3s": "every-3s-now-4s", "every-5s": "every-5s", "custom": "custom"})
    f.proxy.cut()
    synced_before = [e for e in f.effects() if e[0] != "custom"]
    down = f.beat()
    f.synced(down, "not synced into beat/fleet")
    custom = f.ran("custom")
    f.wait(lambda: f.ran("custom") >= custom + 2, "beat to run its own entry meanwhile")
    assert [e for e in f.effects() if e[0] != "custom"] == synced_before  # nothing synced ran twice (or at all)
    f.proxy.restore()
    f.synced(down, "of fleet synced into beat/fleet (the store answered)")
    assert f.procs.log(down).count("not synced into beat/fleet") == 1  # logged once, then once on success
    f.wait(lambda: f.ran("every-5s") >= 2, "the entry added while the store was down")
    f.stop(down)
    counts = f.check_once_per_fire()
    assert counts["every-5s"] >= 2 and f.routine("every-5s")["source"] == "beat-sync:fleet"
