"""Part 1 of the demo: the Celery operator's case. A fleet's ``beat_schedule`` imported, then run.

docs/architecture.md, section "The modules, in detail" (cli/demo_beat.py).
"""

from __future__ import annotations

import time
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

from alma_schedule.cli.demo_job import CELERY_PARTS, SIM_START
from alma_schedule.errors import missing_extra
from alma_schedule.model import RunRecord, Scope
from alma_schedule.model.time import SettableTime
from alma_schedule.settings import Settings

OPS = Scope("demo", "ops")
FLEET_APP = "alma_schedule.cli.demo_fleet:app"
WORKER_WAIT = 60.0  # seconds the worker may take to run what the ticks sent (condition-based)


def require_celery() -> None:
    """Refuse, in one line naming the extra, a demo with its Celery parts on a bare install."""
    try:
        import celery.contrib.testing.worker  # noqa: F401
    except ModuleNotFoundError as exc:
        raise missing_extra(exc, "celery", CELERY_PARTS) from None


def operator_part(
    folder: Path, *, hours: int = 24, step: timedelta = timedelta(minutes=5), echo: Any = print
) -> dict[str, Any]:
    """Import the demo fleet's ``beat_schedule`` into a SQLite store in ``folder``, tick it over
    ``hours`` simulated hours (one tick every ``step``) with a real worker running the fleet's tasks.

    Returns ``{"claimed": {routine: fires}, "ran": {routine: task runs}, "twice": n, "missing": n}``.
    """
    require_celery()
    from celery.contrib.testing.worker import start_worker

    from alma_schedule.beat.importer import apply_import, plan_import, plan_warnings
    from alma_schedule.cli import demo_fleet
    from alma_schedule.cli.beat_cmds import render_import
    from alma_schedule.engine import create_scheduler
    from alma_schedule.policies.allow import TaskAllow
    from alma_schedule.runners.task import TaskRunner
    from alma_schedule.stores import migrate_store, open_store

    clock = SettableTime(SIM_START)
    settings = Settings(database_url=f"sqlite:///{folder}/ops.sqlite3", tick_period=step, time_source=clock)
    migrate_store(settings.database_url)
    store = open_store(settings.database_url)
    echo(
        "Your beat_schedule becomes routines of kind `task`: one import, then each fire a tick claims sends\n"
        "your own Celery task ONCE, and your own worker runs it. The fleet here stands for your proj/celery.py:\n"
        f"{FLEET_APP} (three tasks, four beat entries, kombu's in-memory broker).\n"
    )
    echo(f"$ alma-schedule import-beat {FLEET_APP} {OPS}          # the dry run: writes nothing")
    plan = plan_import(demo_fleet.app, OPS)
    warnings = plan_warnings(plan, settings.tick_period)
    render_import(plan, warnings, None, track=False)
    echo(f"\n$ alma-schedule import-beat {FLEET_APP} {OPS} --apply")
    runner = TaskRunner(demo_fleet.app, allow=TaskAllow.from_settings(settings))
    schedule = create_scheduler(store=store, runner=runner, settings=settings)
    render_import(plan, warnings, apply_import(schedule, plan, now=SIM_START), track=False)
    echo(
        "first-monday-report stays in beat: Celery ANDs its two day fields, cron ORs them, and no cron says\n"
        "the same (rewrite it, or keep it in beat). In your fleet, now remove the imported entries from\n"
        "beat_schedule, or they run twice (beat under install(app, beat_clock=True) refuses to start).\n"
    )

    before = demo_fleet.executed()
    echo(f"simulated: {SIM_START:%Y-%m-%d %H:%MZ} + {hours} h, a {_minutes(step)} tick; a real worker runs the tasks")
    ticks = 0
    with start_worker(demo_fleet.app, pool="solo", perform_ping_check=False, shutdown_timeout=10, loglevel="ERROR"):
        t, end = SIM_START, SIM_START + timedelta(hours=hours)
        while t <= end:
            clock.at = t
            schedule.tick(now=t)
            ticks += 1
            t += step
        runs = store.list_runs(OPS, limit=100_000)
        wanted = {_task_id(r) for r in runs}
        deadline = time.monotonic() + WORKER_WAIT
        while time.monotonic() < deadline and not wanted <= set(_since(demo_fleet.executed(), before)):
            time.sleep(0.05)
    store.close()
    ran = _since(demo_fleet.executed(), before)
    return _report(runs, ran, ticks=ticks, step=step, echo=echo)


def _report(runs: list[RunRecord], ran: Counter[str], *, ticks: int, step: timedelta, echo: Any) -> dict[str, Any]:
    from alma_schedule.cli.context import print_table

    claimed: Counter[str] = Counter(r.routine_id for r in runs)
    states = Counter((r.routine_id, f"{r.state}({r.reason})" if r.reason else str(r.state)) for r in runs)
    done: Counter[str] = Counter()
    again: Counter[str] = Counter()
    for r in runs:
        n = ran.get(_task_id(r), 0)
        done[r.routine_id] += min(n, 1)
        again[r.routine_id] += max(n - 1, 0)
    twice = sum(again.values())
    missing = sum(claimed.values()) - sum(done.values())
    print_table(
        f"{ticks} ticks: the ledger of {OPS}, and the fleet worker's own count",
        ["routine", "fires claimed", "ledger", "tasks the worker ran", "ran twice"],
        [
            (rid, n, ", ".join(f"{s} {c}" for (k, s), c in sorted(states.items()) if k == rid), done[rid], again[rid])
            for rid, n in sorted(claimed.items())
        ],
    )
    total = sum(claimed.values())
    if twice or missing:
        echo(f"NOT once per fire: {twice} task runs twice, {missing} fires whose task did not run")
    else:
        echo(f"every claimed fire sent its task once and the worker ran it once: {total} fires, {total} task runs")
    echo(
        f"refresh-cache is `every 30s` but ran {claimed['refresh-cache']} times in {ticks} ticks: a tick claims only "
        "a routine's LATEST\n"
        f"due fire, so on a {_minutes(step)} tick it runs once per tick; the fires in between are not replayed\n"
        "(guarantee 3; import-beat warned of it). Tick as often as your shortest entry (ALMA_TICK_PERIOD) to keep\n"
        "beat's rate."
    )
    nightly = [r for r in runs if r.routine_id == "nightly-report"]
    if nightly:
        from zoneinfo import ZoneInfo

        at = nightly[0].fire_at.astimezone(ZoneInfo("Europe/London"))
        echo(
            f"nightly-report (01:30 London) fired at {at:%H:%M %Z} on {at:%d %b}: 01:30 did not exist that night, "
            "and a fixed-time\njob in a spring-forward gap fires once, right after it (cron's DST policy)."
        )
    echo(
        "completed(sent) means SENT, not ran: the worker's count is what shows they ran here; with\n"
        "--track --deadline 1h the ledger follows each task's result instead (completed(ok), failed, timed_out).\n"
    )
    return {"claimed": dict(claimed), "ran": dict(done), "twice": twice, "missing": missing, "ticks": ticks}


def _task_id(run: RunRecord) -> str:
    from alma_schedule.runners.task import task_id_for

    return task_id_for(run.key)


def _since(now: Counter[str], before: Counter[str]) -> Counter[str]:
    return Counter({k: v - before.get(k, 0) for k, v in now.items() if v > before.get(k, 0)})


def _minutes(step: timedelta) -> str:
    return f"{int(step.total_seconds() // 60)}-minute"  # the demo's --step is whole minutes


__all__ = ["FLEET_APP", "OPS", "operator_part", "require_celery"]
