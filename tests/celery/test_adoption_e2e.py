"""Issue 13's "Done when": a fleet adopts alma-schedule as its operator would, and every fire runs once.

A fleet project outside the package (its own ``fleet.py`` in tmp_path: a Celery app whose broker is a
Redis db of this test, one task that records each execution, a ``beat_schedule`` of a crontab every
minute, intervals of 20 s and 5 s, a crontab that ANDs its day fields and a solar entry) adds the one
line ``install(app, beat_clock=True)`` (``alma_tick_period`` in its own conf: 10 s). Then, from its
folder, with NO ``ALMA_*`` variable but ``ALMA_DATABASE_URL``: ``alma-schedule -A fleet migrate``,
``alma-schedule -A fleet import-beat fleet:app acme/ops --apply``, the imported entries removed from
the module, the two documented workers and ``celery -A fleet beat`` as the clock, for two minutes of
real time; then the same with three beats at once. The fleet task's own side effects (a Redis list of
``[entry, task id]``) are compared with the ledger: every fire a tick claimed ran its task once, never
twice, and an entry shorter than the tick period ran at most once per tick.
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import redis
from celery_support import CELERY, Procs, wait_for, wait_worker_ready
from fleet_project import alma, clean_env

from alma_schedule.model import RunKey
from alma_schedule.runners.task import task_id_for

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]

WINDOW = 120.0  # seconds of real time with the beats running
IMPORTED = ("every-minute", "every-20s", "every-5s")
KEPT = ("first-monday", "sunset")  # import-beat refuses them; they stay in beat
TERMINAL = ("completed", "failed", "refused", "skipped", "timed_out")

FLEET = """\
import json

import redis
from celery import Celery
from celery.schedules import crontab, solar
from datetime import timedelta

from alma_schedule.celery import install

app = Celery("fleet", broker={broker!r}, backend={broker!r})
app.conf.update(timezone="UTC", alma_tick_period="10s", beat_schedule={{
{entries}
}})
effects = redis.Redis.from_url({broker!r})


@app.task(name="fleet.record", bind=True)
def record(self, entry):
    effects.rpush("fleet:effects", json.dumps([entry, self.request.id]))


install(app, beat_clock=True)
"""

ENTRIES = {
    "every-minute": 'crontab(), "args": ["every-minute"]',
    "every-20s": 'timedelta(seconds=20), "args": ["every-20s"]',
    "every-5s": 'timedelta(seconds=5), "args": ["every-5s"]',
    "first-monday": 'crontab(minute=0, hour=7, day_of_month="1-7", day_of_week=1), "args": ["first-monday"]',
    "sunset": 'solar("sunset", 48.85, 2.35), "args": ["sunset"]',
}


def write_fleet(root: Path, broker: str, names: tuple[str, ...]) -> None:
    entries = "\n".join(f'    "{n}": {{"task": "fleet.record", "schedule": {ENTRIES[n]}}},' for n in names)
    (root / "fleet.py").write_text(FLEET.format(broker=broker, entries=entries))
    for cached in root.glob("__pycache__/fleet.*"):
        cached.unlink()


class Fleet:
    """The fleet's folder, its processes and what it left behind (effects, ledger, tick count)."""

    def __init__(self, root: Path, pg_url: str, redis_url: str) -> None:
        self.root = root
        self.env = clean_env(ALMA_DATABASE_URL=pg_url)  # the only ALMA_* variable anywhere
        self.procs = Procs(root)
        self.r = redis.Redis.from_url(redis_url)

    def alma(self, *args: str) -> str:
        done = alma(self.root, "-A", "fleet", *args, env=self.env)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    def start(self, name: str, *args: str) -> None:
        self.procs.start(name, [CELERY, "-A", "fleet", *args, "--loglevel", "INFO"], self.env, cwd=self.root)

    def alive(self) -> None:
        for name, proc in self.procs.procs:
            assert proc.poll() is None, f"{name} exited {proc.returncode}:\n{self.procs.log(name)[-3000:]}"

    def ledger(self) -> list[dict[str, Any]]:
        return json.loads(self.alma("runs", "list", "acme/ops", "--json", "--limit", "10000"))  # type: ignore[no-any-return]

    def effects(self) -> list[tuple[str, str]]:
        return [tuple(json.loads(e)) for e in self.r.lrange("fleet:effects", 0, -1)]  # type: ignore[misc]

    def idle(self) -> bool:
        """Nothing in flight: every run terminal and our queues and the fleet's drained."""
        queued = sum(int(self.r.llen(q)) for q in ("alma.tick", "alma.run", "alma.collect", "celery"))
        return queued == 0 and all(run["state"] in TERMINAL for run in self.ledger())

    def ticks(self) -> int:
        """Ticks the tick worker ran (an expired tick is discarded, not run)."""
        return len(re.findall(r"Task alma_schedule\.tick\[[0-9a-f-]+\] succeeded", self.procs.log("tick")))


@pytest.fixture
def fleet(tmp_path: Path, pg_url: str, redis_url: str) -> Any:
    """The adoption, steps 1-4: the fleet module with its install line, migrate, import-beat --apply,
    the imported entries removed; then the two documented workers, ready."""
    root = tmp_path / "proj"
    root.mkdir()
    write_fleet(root, redis_url, IMPORTED + KEPT)
    f = Fleet(root, pg_url, redis_url)
    try:
        f.alma("migrate")
        dry = f.alma("import-beat", "fleet:app", "acme/ops")
        assert "every-5s" in dry and "shorter than the tick period" in dry  # 5 s < alma_tick_period 10 s
        applied = f.alma("import-beat", "fleet:app", "acme/ops", "--apply")
        assert "3 created, 0 updated, 0 unchanged, 2 refused in acme/ops." in applied, applied
        write_fleet(root, redis_url, KEPT)  # the imported entries leave the beat_schedule
        f.start("tick", "worker", "-Q", "alma.tick", "-c", "1", "-n", "tick@%h")
        f.start("run", "worker", "-Q", "alma.run,alma.collect,celery", "-n", "run@%h")
        wait_worker_ready(f.procs, "tick", 60)
        wait_worker_ready(f.procs, "run", 60)
        yield f
    finally:
        f.procs.stop_all()
        f.r.close()


def run_beats(f: Fleet, n: int) -> int:
    """``n`` beats (each its own --schedule file) for WINDOW seconds, then stopped and everything drained;
    the workers stopped (warm) last. Returns the number of ticks the tick worker ran."""
    for i in range(n):
        f.start(f"beat{i}", "beat", "--schedule", str(f.root / f"beat{i}-schedule"))
    end = time.monotonic() + WINDOW
    while time.monotonic() < end:
        f.alive()
        time.sleep(1)
    for name, proc in list(f.procs.procs):
        if name.startswith("beat"):
            assert f.procs.stop(proc) == 0, f.procs.log(name)[-3000:]
    wait_for(f.idle, 60, 1, "the last fires to run")
    procs = dict(f.procs.procs)
    assert f.procs.stop(procs["tick"], 60) == 0, f.procs.log("tick")[-3000:]  # its last tick done
    wait_for(f.idle, 60, 1, "the last tick's fires to run")
    assert f.procs.stop(procs["run"], 60) == 0, f.procs.log("run")[-3000:]
    for name in (f"beat{i}" for i in range(n)):
        log = f.procs.log(name)
        assert "first-monday (" in log and "sunset (solar" in log  # kept in beat, and said so
    return f.ticks()


def check_every_fire_ran_once(f: Fleet, ticks: int) -> dict[str, list[datetime]]:
    ledger = f.ledger()
    effects = f.effects()
    assert {run["routine_id"] for run in ledger} <= set(IMPORTED)
    unfinished = [run for run in ledger if run["state"] not in ("completed", "skipped")]
    assert unfinished == [], unfinished
    sent = [run for run in ledger if run["state"] == "completed"]
    assert all(run["reason"] == "sent" for run in sent)
    expected = {task_id_for(RunKey(r["org"], r["uid"], r["routine_id"], r["run_id"])): r["routine_id"] for r in sent}
    ran = [(entry, task_id) for entry, task_id in effects if entry in IMPORTED]
    twice = [task_id for task_id, n in Counter(t for _, t in ran).items() if n > 1]
    assert twice == [], f"fleet tasks that ran twice: {twice}"
    assert {t: e for e, t in ran} == expected  # each claimed fire's task ran once, with its own arguments
    fires: dict[str, list[datetime]] = {name: [] for name in IMPORTED}
    for run in sent:
        fires[run["routine_id"]].append(datetime.fromisoformat(run["fire_at"]))
    for name in IMPORTED:
        fires[name].sort()
        per_tick = Counter(r["routine_id"] for r in ledger)[name]
        assert per_tick <= ticks, f"{name}: {per_tick} fires claimed by {ticks} ticks"
    assert all(at.second == 0 and at.microsecond == 0 for at in fires["every-minute"])
    for name, step in (("every-20s", 20), ("every-5s", 5)):
        gaps = [(b - a).total_seconds() for a, b in zip(fires[name], fires[name][1:], strict=False)]
        assert all(g > 0 and g % step == 0 for g in gaps), (name, gaps)  # on its grid, never the same fire
    return fires


def test_one_beat_every_imported_fire_runs_once_for_two_minutes(fleet: Fleet) -> None:
    ticks = run_beats(fleet, 1)
    assert 8 <= ticks <= 14, ticks  # one beat: a tick every 10 s for 120 s (the first after one period)
    fires = check_every_fire_ran_once(fleet, ticks)
    assert len(fires["every-minute"]) >= 1
    assert len(fires["every-20s"]) >= 4
    assert ticks - 2 <= len(fires["every-5s"]) <= ticks  # shorter than the period: once per tick


def test_three_beats_at_once_every_imported_fire_still_runs_once(fleet: Fleet) -> None:
    ticks = run_beats(fleet, 3)
    assert ticks >= 24, ticks  # three clocks: about three ticks per period
    fires = check_every_fire_ran_once(fleet, ticks)
    assert len(fires["every-minute"]) >= 1 and len(fires["every-20s"]) >= 4
    window = timedelta(seconds=WINDOW + 30)
    assert 8 <= len(fires["every-5s"]) <= window / timedelta(seconds=5)  # at most one run per 5 s fire


def test_beat_refuses_to_start_while_it_holds_an_imported_entry(tmp_path: Path, pg_url: str, redis_url: str) -> None:
    """Step 3 is enforced: before the imported entries leave the beat_schedule, beat exits 1 naming them."""
    root = tmp_path / "proj"
    root.mkdir()
    write_fleet(root, redis_url, IMPORTED + KEPT)
    f = Fleet(root, pg_url, redis_url)
    try:
        f.start("beat", "beat", "--schedule", str(root / "beat-schedule"))
        proc = dict(f.procs.procs)["beat"]
        wait_for(lambda: proc.poll() is not None, 60, 0.2, "beat to refuse")
        log = f.procs.log("beat")
        assert proc.returncode == 1, log[-3000:]
        line = log[log.index("beat_schedule still holds") :].splitlines()[0]
        assert all(name in line for name in IMPORTED) and not any(name in line for name in KEPT), line
        assert f.r.llen("alma.tick") == 0 and f.effects() == []
    finally:
        f.procs.stop_all()
        f.r.close()
