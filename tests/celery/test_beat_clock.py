"""``install(app, beat_clock=True)``: the fleet's own ``celery beat`` as the clock.

In-process, through Celery's real ``beat.Service`` and its ``beat_init`` signal: exactly one tick
entry with our period and expiry, and every refusal. Then a REAL ``celery -A fleet beat``
subprocess (a fleet module written into tmp_path, its broker a Redis db of this test): the tick
messages in the queue, exit 1 naming a convertible entry, unconvertible entries kept and warned,
``celery.*`` ignored, two beats at once, a custom scheduler refused unless keep_beat_entries=True.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import textwrap
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import redis
from celery import Celery, beat
from celery.schedules import crontab, schedule, solar
from celery.signals import beat_init
from celery_support import CELERY, wait_for
from test_dispatcher import messages

from alma_schedule.celery import install
from alma_schedule.errors import ConfigurationError
from alma_schedule.model import TICK_TASK
from alma_schedule.settings import Settings, load_settings
from alma_schedule.tasks.beat_clock import check_beat_schedule, connect_beat_clock
from alma_schedule.tasks.beat_schedule import HintSchedule

PERIOD = timedelta(seconds=10)


def fleet(beat_schedule: dict[str, Any], **install_kw: Any) -> Celery:
    app = Celery("fleet", broker="memory://", set_as_current=False)
    app.conf.update(beat_schedule=beat_schedule, timezone="UTC")

    @app.task(name="fleet.ping", shared=False)
    def ping() -> str:
        return "pong"

    install(app, settings=Settings(tick_period=PERIOD, beat_sync=False), beat_clock=True, **install_kw)
    return app


@pytest.fixture
def services(tmp_path: Path) -> Iterator[list[beat.Service]]:
    made: list[beat.Service] = []
    yield made
    for svc in made:
        if "scheduler" in svc.__dict__:
            with contextlib.suppress(Exception):  # already closed by a refusal
                svc.scheduler.close()


def start(app: Celery, tmp_path: Path, made: list[beat.Service], scheduler_cls: str | None = None) -> beat.Service:
    """Build beat's Service (the scheduler as ``celery beat`` builds it) and send ``beat_init``."""
    kw = {"scheduler_cls": scheduler_cls} if scheduler_cls else {}
    svc = beat.Service(app=app, schedule_filename=str(tmp_path / f"beat-{len(made)}"), **kw)
    made.append(svc)
    beat_init.send(sender=svc)
    return svc


class StoreScheduler(beat.Scheduler):
    """Stands for django-celery-beat or RedBeat: a scheduler class that is not Celery's own."""


KEPT = {
    "lights": {"task": "fleet.ping", "schedule": solar("sunset", 90, 0)},
    "first-monday": {"task": "fleet.ping", "schedule": crontab(minute=0, hour=7, day_of_month="1-7", day_of_week=1)},
    "celery.backend_cleanup": {"task": "celery.backend_cleanup", "schedule": crontab(minute=0, hour=4)},
}


def test_beat_init_adds_exactly_one_tick_entry_and_keeps_what_cannot_convert(
    tmp_path: Path, services: list[beat.Service], caplog: pytest.LogCaptureFixture
) -> None:
    svc = start(fleet(dict(KEPT)), tmp_path, services)
    entries = svc.scheduler.schedule
    ticks = [e for e in entries.values() if e.task == TICK_TASK]
    assert len(ticks) == 1 and ticks[0].name == TICK_TASK
    assert isinstance(ticks[0].schedule, HintSchedule) and ticks[0].schedule.run_every == PERIOD  # the heartbeat
    assert ticks[0].options == {"expires": 9.0, "serializer": "json", "ignore_result": True}  # 10 s - max(1 s, 10/12)
    assert set(ticks[0].kwargs) == {"woken_for"}
    assert {"lights", "first-monday", "celery.backend_cleanup"} <= set(entries)  # kept in beat
    warned = " ".join(r.getMessage() for r in caplog.records if r.levelname == "WARNING")
    assert "lights (solar" in warned and "first-monday (day_of_month" in warned
    assert "celery.backend_cleanup" not in warned  # Celery's own: ignored


def test_a_convertible_entry_stops_beat_naming_it(
    tmp_path: Path, services: list[beat.Service], caplog: pytest.LogCaptureFixture
) -> None:
    app = fleet(
        {
            **KEPT,
            "sync": {"task": "fleet.ping", "schedule": 300},
            "nightly": {"task": "fleet.ping", "schedule": crontab(minute=30, hour=2)},
        }
    )
    with pytest.raises(SystemExit) as stopped:
        start(app, tmp_path, services)
    assert stopped.value.code == 1
    (error,) = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert "sync, nightly" in error and "twice" in error and "keep_beat_entries=True" in error
    assert "\n" not in error


def test_keep_beat_entries_starts_beat_with_them_and_warns(
    tmp_path: Path, services: list[beat.Service], caplog: pytest.LogCaptureFixture
) -> None:
    app = fleet({"sync": {"task": "fleet.ping", "schedule": 300}}, keep_beat_entries=True)
    svc = start(app, tmp_path, services)
    assert {"sync", TICK_TASK} <= set(svc.scheduler.schedule)
    assert any("sync" in r.getMessage() and "twice" in r.getMessage() for r in caplog.records)


def test_another_scheduler_class_is_refused_unless_keep_beat_entries(
    tmp_path: Path, services: list[beat.Service], caplog: pytest.LogCaptureFixture
) -> None:
    cls = f"{__name__}:StoreScheduler"
    with pytest.raises(SystemExit):
        start(fleet({}), tmp_path, services, cls)
    assert any("StoreScheduler" in r.getMessage() and "keep_beat_entries" in r.getMessage() for r in caplog.records)
    kept = start(fleet({}, keep_beat_entries=True), tmp_path, services, cls)
    assert [e.task for e in kept.scheduler.schedule.values()] == [TICK_TASK]
    (entry,) = kept.scheduler.schedule.values()
    assert type(entry.schedule) is schedule and entry.schedule.run_every == PERIOD  # a fixed period there
    (lag,) = [r.getMessage() for r in caplog.records if "fixed-period entry" in r.getMessage()]
    assert "StoreScheduler" in lag and "up to ALMA_TICK_PERIOD (10s) late" in lag


def test_a_beat_entry_of_our_own_tick_is_refused_and_another_apps_beat_is_left_alone(
    tmp_path: Path, services: list[beat.Service], caplog: pytest.LogCaptureFixture
) -> None:
    with pytest.raises(SystemExit):
        start(fleet({"my-tick": {"task": TICK_TASK, "schedule": 60}}), tmp_path, services)
    assert any("my-tick" in r.getMessage() for r in caplog.records if r.levelname == "ERROR")
    fleet({"sync": {"task": "fleet.ping", "schedule": 300}})  # installed, but this beat is another app's
    other = Celery("other", broker="memory://", set_as_current=False)
    other.conf.beat_schedule = {"sync": {"task": "x", "schedule": 300}}
    svc = start(other, tmp_path, services)
    assert TICK_TASK not in svc.scheduler.schedule


def test_a_bad_setting_stops_beat_instead_of_being_swallowed(
    tmp_path: Path, services: list[beat.Service], caplog: pytest.LogCaptureFixture
) -> None:
    """Celery's signal dispatch logs and swallows an ordinary exception: the receiver turns it into exit 1."""
    app = Celery("fleet", broker="memory://", set_as_current=False)
    connect_beat_clock(app, lambda: load_settings(environ={"ALMA_TICK_PERIOD": "10s", "ALMA_TICK_EXPIRES": "30s"}))
    with pytest.raises(SystemExit):
        start(app, tmp_path, services)
    (error,) = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert "beat stops" in error and "ALMA_TICK_EXPIRES" in error and "ALMA_TICK_PERIOD" in error


def test_keep_beat_entries_without_beat_clock_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="beat_clock=True"):
        install(Celery("x", broker="memory://", set_as_current=False), settings=Settings(), keep_beat_entries=True)


def test_the_check_is_the_import_beat_conversion() -> None:
    app = fleet(
        {
            **KEPT,
            "sync": {"task": "fleet.ping", "schedule": timedelta(minutes=5)},
            "ghost": {"task": "fleet.nope", "schedule": 60},
        }
    )
    check = check_beat_schedule(app)
    assert check.convertible == ("sync",)
    assert {n for n, _ in check.kept} == {"lights", "first-monday", "ghost"}


# --------------------------------------------------------------------------- real `celery beat`

FLEET = '''
import os
from celery import Celery, beat
from celery.schedules import BaseSchedule, crontab, schedstate, solar
from alma_schedule.celery import install
from alma_schedule.settings import load_settings

class AlwaysDue(BaseSchedule):
    """A custom schedule class: import-beat cannot convert it, so it stays in beat."""

    def is_due(self, last_run_at):
        return schedstate(True, 1.0)

    def remaining_estimate(self, last_run_at):
        return 0


class StoreScheduler(beat.Scheduler):
    """Stands for django-celery-beat or RedBeat."""


app = Celery("fleet", broker=os.environ["FLEET_BROKER"])
app.conf.update(timezone="UTC", beat_schedule={BEAT_SCHEDULE})


@app.task(name="fleet.ping")
def ping():
    return "pong"


install(app, settings=load_settings(), beat_clock=True{KEEP})
'''

KEPT_ENTRIES = """{
    "lights": {"task": "fleet.ping", "schedule": solar("sunset", 90, 0)},
    "custom": {"task": "fleet.ping", "schedule": AlwaysDue()},
    "first-monday": {"task": "fleet.ping", "schedule": crontab(minute=0, hour=7, day_of_month="1-7", day_of_week=1)},
    "celery.backend_cleanup": {"task": "celery.backend_cleanup", "schedule": crontab(minute=0, hour=4)},
}"""


class Beats:
    def __init__(self, tmp_path: Path, redis_url: str) -> None:
        self.tmp_path = tmp_path
        self.redis_url = redis_url
        self.procs: list[subprocess.Popen[bytes]] = []

    def write(self, beat_schedule: str, keep: bool = False, installed: bool = True) -> None:
        text = FLEET.replace("{BEAT_SCHEDULE}", textwrap.indent(beat_schedule, "").strip())
        text = text.replace("{KEEP}", ", keep_beat_entries=True" if keep else "")
        if not installed:  # the fleet uninstalled us (or runs a version without the beat clock)
            text = text.replace("install(app, settings=load_settings(), beat_clock=True)", "")
        for cached in self.tmp_path.glob("__pycache__/fleet.*"):
            cached.unlink()
        (self.tmp_path / "fleet.py").write_text(text)

    def start(self, name: str, *extra: str) -> subprocess.Popen[bytes]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("ALMA_")}
        env.update(FLEET_BROKER=self.redis_url, ALMA_TICK_PERIOD="2s", PYTHONUNBUFFERED="1", ALMA_BEAT_SYNC="false")
        env.pop("PYTHONPATH", None)  # the fleet is found as `celery -A` finds it: the working directory
        log = open(self.tmp_path / f"{name}.log", "wb")
        proc = subprocess.Popen(
            [
                CELERY,
                "-A",
                "fleet",
                "beat",
                "--loglevel",
                "INFO",
                "-s",
                str(self.tmp_path / f"{name}-schedule"),
                *extra,
            ],
            cwd=self.tmp_path,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        self.procs.append(proc)
        return proc

    def log(self, name: str) -> str:
        return (self.tmp_path / f"{name}.log").read_text(errors="replace")

    def alive(self, *procs: subprocess.Popen[bytes]) -> None:
        """Fail at once (with the logs) when a beat that should run has exited."""
        for i, proc in enumerate(procs):
            if proc.poll() is not None:
                logs = "\n".join(p.read_text(errors="replace")[-3000:] for p in self.tmp_path.glob("*.log"))
                raise AssertionError(f"beat #{i} exited {proc.returncode}:\n{logs}")

    def stop_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(10)


@pytest.fixture
def beats(tmp_path: Path, redis_url: str) -> Iterator[Beats]:
    b = Beats(tmp_path, redis_url)
    try:
        yield b
    finally:
        b.stop_all()


@pytest.fixture
def r(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


def tick_messages(r: redis.Redis) -> list[dict[str, Any]]:
    return [m for m in messages(r, "alma.tick") if m["headers"]["task"] == TICK_TASK]


def wait_exit(proc: subprocess.Popen[bytes], timeout: float = 120.0) -> int:
    wait_for(lambda: proc.poll() is not None, timeout, 0.2, "beat to exit")
    return int(proc.returncode)


pytestmark = pytest.mark.redis


@pytest.mark.slow
def test_real_beat_sends_expiring_ticks_keeps_the_rest_and_two_beats_are_harmless(beats: Beats, r: redis.Redis) -> None:
    beats.write(KEPT_ENTRIES)
    one, two = beats.start("beat1"), beats.start("beat2")

    def from_both() -> list[dict[str, Any]]:
        beats.alive(one, two)
        ticks = tick_messages(r)
        return ticks if len({m["headers"]["origin"] for m in ticks}) >= 2 else []

    origins = wait_for(
        from_both,
        120,
        0.2,
        "ticks from both beats",
    )
    assert one.poll() is None and two.poll() is None
    for m in origins:
        headers = m["headers"]
        assert headers["task"] == TICK_TASK and m["content-type"] == "application/json"
        expires = datetime.fromisoformat(headers["expires"])  # 2 s - max(1 s, 2/12 s) = 1 s after the send
        assert expires <= datetime.now(UTC) + timedelta(seconds=1.5)
    # the custom schedule stays in beat: it sends the fleet's task (to the fleet's own default queue)
    wait_for(lambda: any(m["headers"]["task"] == "fleet.ping" for m in messages(r, "celery")), 60, 0.2, "kept")
    log = beats.log("beat1")
    assert "lights (solar" in log and "custom (custom schedule class" in log and "first-monday (" in log
    # its store was never migrated: no hint, so it beats on the period (2 s), and says so once
    wait_for(lambda: len(tick_messages(r)) >= 4, 60, 0.2, "two beats beating on the period")
    log = beats.log("beat1")
    assert log.count("no wake-up hint") == 1 and "ticking on the heartbeat (ALMA_TICK_PERIOD)" in log
    assert "celery.backend_cleanup (" not in log


@pytest.mark.slow
def test_real_beat_exits_1_naming_a_convertible_entry(beats: Beats, r: redis.Redis) -> None:
    beats.write(KEPT_ENTRIES[:-1] + '    "sync": {"task": "fleet.ping", "schedule": 300},\n}')
    proc = beats.start("beat")
    assert wait_exit(proc) == 1, beats.log("beat")
    log = beats.log("beat")
    assert "beat_schedule still holds entries that import-beat converts: sync;" in log
    assert tick_messages(r) == [] and r.llen("celery") == 0  # nothing sent, the custom entry included


@pytest.mark.slow
def test_real_beat_refuses_another_scheduler_unless_keep_beat_entries(beats: Beats, r: redis.Redis) -> None:
    beats.write("{}")
    refused = beats.start("refused", "-S", "fleet:StoreScheduler")
    assert wait_exit(refused) == 1, beats.log("refused")
    assert "fleet.StoreScheduler" in beats.log("refused") and "keep_beat_entries=True" in beats.log("refused")
    assert tick_messages(r) == []
    beats.write("{}", keep=True)
    kept = beats.start("kept", "-S", "fleet:StoreScheduler")
    wait_for(lambda: beats.alive(kept) or tick_messages(r), 120, 0.2, "a tick from beat under the custom scheduler")
    assert kept.poll() is None


@pytest.mark.slow
def test_beat_restarts_on_the_schedule_file_it_pickled_even_without_us(beats: Beats, r: redis.Redis) -> None:
    """Beat pickles its entries at shutdown: ours pickles as a plain schedule, so beat starts again on
    that file with us installed (our entry re-installed) and with a fleet app that no longer installs us."""
    beats.write(KEPT_ENTRIES)
    first = beats.start("first", "-s", str(beats.tmp_path / "kept-schedule"))
    wait_for(lambda: beats.alive(first) or tick_messages(r), 120, 0.2, "a tick from the first beat")
    first.terminate()
    assert first.wait(60) == 0, beats.log("first")
    assert (beats.tmp_path / "kept-schedule").exists() or list(beats.tmp_path.glob("kept-schedule*"))
    r.delete("alma.tick")
    again = beats.start("again", "-s", str(beats.tmp_path / "kept-schedule"))
    wait_for(lambda: beats.alive(again) or tick_messages(r), 120, 0.2, "a tick from the restarted beat")
    again.terminate()
    assert again.wait(60) == 0, beats.log("again")
    assert "Traceback" not in beats.log("again")
    r.delete("alma.tick")
    beats.write(KEPT_ENTRIES, installed=False)
    without = beats.start("without", "-s", str(beats.tmp_path / "kept-schedule"))
    # beat runs the fleet's own entries from that file (the custom one is always due) and no tick of ours
    wait_for(
        lambda: beats.alive(without) or any(m["headers"]["task"] == "fleet.ping" for m in messages(r, "celery")),
        120,
        0.2,
        "beat without us to run the fleet's entries",
    )
    assert without.poll() is None and tick_messages(r) == []
    log = beats.log("without")
    assert "Traceback" not in log and "Removing corrupted schedule file" not in log, log[-3000:]
