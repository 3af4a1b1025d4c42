"""Issues 13 and 44's "Done when": a fleet adopts alma-schedule as its operator would, with DEFAULT
settings, and every fire runs once, none missing, each claimed by a tick woken for it.

A fleet project outside the package (its own ``fleet.py`` in tmp_path: a Celery app whose broker is a
Redis db of this test, one task that records each execution, a ``beat_schedule`` of a crontab every
minute, intervals of 2 s, 3 s and 10 s, a crontab that ANDs its day fields and a solar entry at the pole) adds the
one line ``install(app, beat_clock=True)`` and nothing else (no ``alma_*`` setting: a 60 s heartbeat).
Then, from its folder, with NO ``ALMA_*`` variable but ``ALMA_DATABASE_URL``: ``alma-schedule -A fleet
migrate``, ``alma-schedule -A fleet import-beat fleet:app acme/ops --apply``, the imported entries
removed from the module, the README's two workers and a clock (``celery -A fleet beat``; three beats at
once; ``alma-schedule -A fleet clock run``) for a short window of real time. The fleet task's own side
effects (a Redis list of ``[entry, task id]``) are compared with the ledger and the tick worker's log:
every fire due while the clock ran was claimed once, never early, a tick was woken for it (at or after
its instant and long before the heartbeat: the tick report's ``woken_for``), and its task ran once,
never twice.
Counts and order only: nothing here measures a duration (the lag is ``scripts/bench --lag``'s).
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import redis
from celery_support import ALMA, CELERY, Procs, wait_for, wait_worker_ready
from fleet_project import alma, clean_env

from alma_schedule.model import RunKey
from alma_schedule.runners.task import task_id_for

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]

WINDOW = 20.0  # seconds of real time with the clock running
IMPORTED = ("every-minute", "every-2s", "every-3s", "every-10s")
STEPS = {"every-2s": 2, "every-3s": 3, "every-10s": 10, "every-minute": 60}
#: A tick "woken for" a fire is woken at or after it and within this, far below the 60 s heartbeat
#: (under `stress -c 2`, three beats were seen to stall for over 2 s: a fire's next one is no bound).
WOKEN_WITHIN = timedelta(seconds=15)
KEPT = ("first-monday", "sunset")  # import-beat refuses them (a sunset at the pole); they stay in beat
TERMINAL = ("completed", "failed", "refused", "skipped", "timed_out")

FLEET = """\
import json

import redis
from celery import Celery
from celery.schedules import crontab, solar
from datetime import timedelta

from alma_schedule.celery import install

app = Celery("fleet", broker={broker!r}, backend={broker!r})
app.conf.update(timezone="UTC", beat_schedule={{
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
    "every-2s": 'timedelta(seconds=2), "args": ["every-2s"]',
    "every-3s": 'timedelta(seconds=3), "args": ["every-3s"]',
    "every-10s": 'timedelta(seconds=10), "args": ["every-10s"]',
    "first-monday": 'crontab(minute=0, hour=7, day_of_month="1-7", day_of_week=1), "args": ["first-monday"]',
    "sunset": 'solar("sunset", 90, 0), "args": ["sunset"]',
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

    def woken(self) -> dict[datetime, datetime]:
        """Each tick the tick worker ran, by the instant it claimed at: the instant it was woken for."""
        found = re.findall(r"tick woken for (\S+) at (\S+):", self.procs.log("tick"))
        return {datetime.fromisoformat(at): datetime.fromisoformat(woke) for woke, at in found}


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
        # 2 s < the 60 s heartbeat: the warning is only about fixed-cadence clocks
        assert "every-2s: every 2s is shorter than the tick period (60s): a fixed-cadence clock" in dry, dry
        applied = f.alma("import-beat", "fleet:app", "acme/ops", "--apply")
        assert "4 created, 0 updated, 0 unchanged, 2 refused in acme/ops." in applied, applied
        write_fleet(root, redis_url, KEPT)  # the imported entries leave the beat_schedule
        f.start("tick", "worker", "-Q", "alma.tick", "-c", "1", "-n", "tick@%h")
        f.start("run", "worker", "-Q", "alma.run,alma.collect,celery", "-n", "run@%h")
        wait_worker_ready(f.procs, "tick", 60)
        wait_worker_ready(f.procs, "run", 60)
        yield f
    finally:
        f.procs.stop_all()
        f.r.close()


def run_clocks(f: Fleet, n: int, command: tuple[str, ...] = ()) -> tuple[datetime, datetime]:
    """``n`` clocks (beats, each its own --schedule file; or ``command``, an ``alma-schedule`` clock) for
    WINDOW seconds after their first tick ran, then stopped and everything drained; the workers stopped
    (warm) last. Returns the window the clocks covered: from the instant the first tick was woken for
    to the instant the last one was (every fire due in it must have been claimed: each tick claims
    everything due by the time it runs), whatever the machine's speed."""
    for i in range(n):
        if command:
            f.procs.start(f"clock{i}", [ALMA, "-A", "fleet", *command], f.env, cwd=f.root)
        else:
            f.start(f"clock{i}", "beat", "--schedule", str(f.root / f"beat{i}-schedule"))
    try:
        wait_for(lambda: f.alive() or f.woken(), 60, 0.2, "the clock's first tick to run")
    except AssertionError:
        raise AssertionError(f"no tick ran:\n{f.procs.log('tick')[-3000:]}\n{f.procs.log('clock0')[-3000:]}") from None
    end = time.monotonic() + WINDOW
    while time.monotonic() < end:
        f.alive()
        time.sleep(0.5)
    for name, proc in list(f.procs.procs):
        if name.startswith("clock"):
            assert f.procs.stop(proc) == 0, f.procs.log(name)[-3000:]
    wait_for(f.idle, 60, 1, "the last fires to run")
    procs = dict(f.procs.procs)
    assert f.procs.stop(procs["tick"], 60) == 0, f.procs.log("tick")[-3000:]  # its last tick done
    wait_for(f.idle, 60, 1, "the last tick's fires to run")
    assert f.procs.stop(procs["run"], 60) == 0, f.procs.log("run")[-3000:]
    if not command:
        for name in (f"clock{i}" for i in range(n)):
            log = f.procs.log(name)
            assert "first-monday (" in log and "sunset (solar" in log  # kept in beat, and said so
    woken = f.woken().values()
    return min(woken), max(woken)


def grid(name: str, began: datetime, ended: datetime, anchor: datetime) -> list[datetime]:
    """The routine's nominal fires inside the window (an interval counts from its anchor)."""
    step = timedelta(seconds=STEPS[name])
    if name == "every-minute":
        anchor = datetime(2000, 1, 1, tzinfo=UTC)
    k = -(-(began - anchor) // step)  # the first multiple at or after the window's start
    out = []
    at = anchor + k * step
    while at <= ended:
        out.append(at)
        at += step
    return out


def check_every_fire_ran_once_on_time(f: Fleet, began: datetime, ended: datetime) -> dict[str, list[datetime]]:
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
    woken = f.woken()
    fires: dict[str, list[datetime]] = {name: [] for name in IMPORTED}
    for run in sent:
        fire = datetime.fromisoformat(run["fire_at"])
        fires[run["routine_id"]].append(fire)
        if began <= fire <= ended:
            # claimed by a tick that ran at or after it (never early), and a tick was woken for it: at
            # or after its instant, well before the 60 s heartbeat (the clock woke for this fire: within
            # WOKEN_WITHIN, which leaves a loaded machine seconds of stall). The claiming tick may be
            # another one woken just before it that ran after it: each tick claims everything due when
            # it runs.
            claimed_at = datetime.fromisoformat(run["claimed_at"])
            assert claimed_at in woken, f"{run['routine_id']} {fire}: no tick report claimed at {claimed_at}"
            assert claimed_at >= fire, (run["routine_id"], fire, claimed_at)
            assert any(fire <= woke < fire + WOKEN_WITHIN for woke in woken.values()), (run["routine_id"], fire)
    anchors = {name: min(fires[name], default=began) for name in IMPORTED}
    for name in IMPORTED:
        fires[name].sort()
        assert len(set(fires[name])) == len(fires[name]), f"{name}: a fire claimed twice"
        inside = [at for at in fires[name] if began <= at <= ended]
        assert inside == grid(name, began, ended, anchors[name]), (name, inside)  # none missing, none extra
    return fires


@pytest.mark.parametrize("clocks", [1, 3], ids=["one-beat", "three-beats"])
def test_beat_with_default_settings_runs_every_fire_once_none_missing(fleet: Fleet, clocks: int) -> None:
    began, ended = run_clocks(fleet, clocks)
    fires = check_every_fire_ran_once_on_time(fleet, began, ended)
    assert len([at for at in fires["every-2s"] if began <= at <= ended]) >= WINDOW // 2 - 1  # at its rate


def test_clock_run_with_default_settings_runs_every_fire_once_none_missing(fleet: Fleet) -> None:
    began, ended = run_clocks(fleet, 1, ("clock", "run"))
    fires = check_every_fire_ran_once_on_time(fleet, began, ended)
    assert len([at for at in fires["every-3s"] if began <= at <= ended]) >= WINDOW // 3 - 1


def test_beat_refuses_to_start_while_it_holds_an_imported_entry(tmp_path: Path, pg_url: str, redis_url: str) -> None:
    """Step 3 is enforced: before the imported entries leave the beat_schedule, beat exits 1 naming them."""
    root = tmp_path / "proj"
    root.mkdir()
    write_fleet(root, redis_url, IMPORTED + KEPT)
    f = Fleet(root, pg_url, redis_url)
    f.env["ALMA_BEAT_SYNC"] = "false"  # with the sync on (the default) beat syncs them: test_beat_sync_e2e.py
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
