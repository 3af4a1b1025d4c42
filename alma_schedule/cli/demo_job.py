"""The embedded demo's parts 2 and 3 (part 1, the operator's ``import-beat``, is
:mod:`alma_schedule.cli.demo_beat`; :func:`alma_schedule.cli.demo.run_demo` runs them in order).

docs/architecture.md, section "The modules, in detail" (cli/demo_job.py).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from alma_schedule.errors import missing_extra
from alma_schedule.model import Routine, RoutineSpec, RunHandle, RunRecord, RunResult, RunState, Scope, TickReport
from alma_schedule.model.time import SettableTime, system_time
from alma_schedule.settings import Settings

SCOPE = Scope("demo", "alice")
#: What a bare install without --no-celery is told it lacks.
CELERY_PARTS = "the demo with Celery (parts 1 and 3; --no-celery skips them)"
SIM_START = datetime(2026, 3, 28, 12, 0, tzinfo=UTC)  # London springs forward 2026-03-29 01:00Z


class EchoRunner:
    """Demo-only runner: completes at once (what a heartbeat needs)."""

    def validate(self, routine: Routine) -> None:
        return None

    def run(self, routine: Routine, handle: RunHandle) -> RunResult:
        return RunResult.completed("ok")


ROUTINES: list[tuple[str, str, dict[str, Any], dict[str, Any]]] = [
    ("heartbeat", "echo", {"every": "2s"}, {}),
    ("london-minutely", "echo", {"cron": "* * * * *", "tz": "Europe/London"}, {}),
    ("london-0130", "echo", {"cron": "30 1 * * *", "tz": "Europe/London"}, {}),
    (
        "briefing",
        "turn",
        {"cron": "0 8 * * *", "tz": "Europe/Lisbon"},
        {"goal": "Morning briefing: summarise overnight alerts", "budget": {"per_turn_usd": {"usd": 0.05}}},
    ),
    ("digest", "job", {"cron": "0 * * * *", "tz": "UTC"}, {"goal": "Hourly digest of the ticket queue"}),
]


def _settings(folder: Path, clock: Callable[[], datetime], step: timedelta) -> Settings:
    return Settings(
        database_url=f"sqlite:///{folder}/demo.sqlite3",
        broker_url="memory://",
        result_backend="cache+memory://",
        provider="scripted",
        sink=f"file:{folder}/deliveries.jsonl",
        tick_period=step,
        tick_expires=step - timedelta(seconds=1),
        poll_first=timedelta(minutes=90),  # the batch is first polled 90 min later: the next fire overlaps
        cap_per_run_micros=100_000,
        ceiling_org_daily_micros=1_000_000,
        time_source=clock,
    )


def _registry(settings: Settings) -> Any:
    from alma_schedule.runners.registry import KindRegistry

    registry = KindRegistry(settings, use_entry_points=False)
    registry.register("echo", lambda _s: EchoRunner())
    return registry


def _plant_broken_routine(store: Any, at: datetime) -> None:
    """A row an older version wrote with a schedule the core now rejects: the tick must survive it."""
    store.put_routine(
        Routine(
            org=SCOPE.org,
            uid=SCOPE.uid,
            routine_id="broken",
            kind="echo",
            schedule={"cron": "61 * * * *"},
            definition={},
            registered_at=at,
            config_revision="legacy-row",
            next_due_at=at + timedelta(minutes=5),
        ),
        now=at,
    )


def simulate(
    folder: Path, *, hours: int = 24, step: timedelta = timedelta(minutes=5), echo: Any = print
) -> dict[str, Any]:
    """Part 2: a simulated day of the governed kinds. Returns counts for tests."""
    from alma_schedule.engine import create_scheduler
    from alma_schedule.stores import migrate_store, open_store

    clock = SettableTime(SIM_START)
    settings = _settings(folder, clock, step)
    migrate_store(settings.database_url, schema=settings.database_schema)
    store = open_store(settings.database_url, schema=settings.database_schema)
    schedule = create_scheduler(store=store, runner=_registry(settings).resolve, settings=settings)
    echo(
        "The governed kinds: `turn` (one model turn per fire, its text delivered once to a sink, its cost\n"
        "capped before the call) and `job` (a background batch submitted once, collected on a later tick),\n"
        "beside demo-only `echo` routines, over a day across London's spring-forward change (scripted\n"
        "provider, file sink). One routine is a broken legacy row: it must not stop the others.\n"
    )
    echo(
        f"store: SQLite in the demo's temporary folder (removed at the end)\n"
        f"simulated: {SIM_START:%Y-%m-%d %H:%MZ} + {hours} h, a tick every {int(step.total_seconds() // 60)} min\n"
    )
    for rid, kind, sched, definition in ROUTINES:
        receipt = schedule.register(RoutineSpec(SCOPE.org, SCOPE.uid, rid, kind, sched, definition))
        fires = ", ".join(f.strftime("%d %H:%M:%SZ") for f in receipt.next_fires)
        echo(f"registered {rid:<16} {json.dumps(sched):<52} next: {fires}")
        for warning in receipt.warnings:
            echo(f"  warning: {warning}")
    _plant_broken_routine(store, SIM_START)
    echo('planted   broken           {"cron": "61 * * * *"} (a bad legacy row)\n')

    reports: list[TickReport] = []
    t = SIM_START
    end = SIM_START + timedelta(hours=hours)
    while t <= end:
        clock.at = t
        reports.append(schedule.tick(now=t))
        if t == SIM_START + timedelta(hours=6):
            try:
                schedule.trigger(SCOPE, "digest", now=t)
                echo(f"{t:%d %H:%M}Z trigger digest: claimed a manual run")
            except Exception as exc:  # the demo shows the refusal as a user would see it
                echo(f"{t:%d %H:%M}Z trigger digest refused: {exc}")
        t += step

    errors = [(r.at, e) for r in reports for e in r.errors]
    failing = sorted({e.routine for _at, e in errors})
    echo(
        f"ticks: {len(reports)}; claimed {sum(len(r.claimed) for r in reports)}; "
        f"collects {sum(len(r.collect) for r in reports)}; errors reported {len(errors)} "
        f"(every tick while it fails) for {len(failing)} routine(s)"
    )
    for routine in failing:  # the first report of each, and how often it was reported
        times = [(at, e) for at, e in errors if e.routine == routine]
        at, e = times[0]
        echo(f"  tick {at:%d %H:%M}Z error: {e.routine}: {e.error} (reported on {len(times)} ticks)")
    runs = store.list_runs(SCOPE, limit=100_000)
    _print_summary(runs, echo)
    _explain(runs, ticks=len(reports), hours=hours, step=step, echo=echo)
    _print_ledger(runs, echo)
    delivered = _print_deliveries(folder / "deliveries.jsonl", echo)
    store.close()
    states = Counter((r.routine_id, r.state, r.reason) for r in runs)
    return {"runs": len(runs), "errors": len(errors), "states": states, "delivered": delivered, "ticks": len(reports)}


def _print_summary(runs: list[RunRecord], echo: Any) -> None:
    from alma_schedule.cli.context import print_table

    counts = Counter((r.routine_id, r.state, r.reason or "") for r in runs)
    rows = [(rid, state, reason, n) for (rid, state, reason), n in sorted(counts.items())]
    print_table("the ledger, summarised (one row per fire decided)", ["routine", "state", "reason", "runs"], rows)
    del echo


def _explain(runs: list[RunRecord], *, ticks: int, hours: int, step: timedelta, echo: Any) -> None:
    """What the summary shows, one sentence per routine a reader would ask about."""
    count = Counter(r.routine_id for r in runs)
    minutes = int(step.total_seconds() // 60)
    echo(
        f"london-minutely is `* * * * *` but ran {count['london-minutely']} times in {hours * 60} minutes: the "
        f"simulated tick comes every {minutes} min\n"
        f"({ticks} ticks) and claims only a routine's LATEST due fire, so a minutely routine runs once per tick; "
        "the minutes\n"
        "between ticks are not replayed (guarantee 3). heartbeat (`every 2s`) likewise, one run fewer: an `every` "
        "first fires\n"
        "one interval after its registration. digest's batch is first polled 90 min later (ALMA_POLL_FIRST), so "
        "the next hourly\n"
        "fire finds it still `submitted`: skipped(overlap), never in parallel (guarantee 2). broken is one error "
        "entry, backed off;\n"
        "every other routine ran (guarantee 7)."
    )


def _print_deliveries(path: Path, echo: Any) -> int:
    """Count the file sink's deliveries and show the first (the file itself goes with the temp folder)."""
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    echo(f"\ndelivered to the file sink, at most once per fire: {len(lines)}")
    if lines:
        first = json.loads(lines[0])
        text = " ".join(str(first.get("text", "")).split())
        echo(f"  the first: {first.get('routine_id')} {first.get('run_id')}: {text[:90]!r}")
    return len(lines)


def _print_ledger(runs: list[RunRecord], echo: Any) -> None:
    """The interesting rows: around the DST change, every non-heartbeat fire of the night, jobs."""
    from alma_schedule.cli.context import print_table

    night = [
        r
        for r in runs
        if datetime(2026, 3, 29, 0, 0, tzinfo=UTC) <= r.fire_at <= datetime(2026, 3, 29, 2, 0, tzinfo=UTC)
    ]
    keep = [r for r in runs if r.routine_id in {"london-0130", "briefing", "digest"}] + [
        r for r in night if r.routine_id == "london-minutely"
    ]
    keep.sort(key=lambda r: (r.fire_at, r.routine_id))
    from zoneinfo import ZoneInfo

    london = ZoneInfo("Europe/London")
    print_table(
        "what fired, when (London local time shows the spring-forward gap)",
        ["routine", "run id", "London", "state", "reason", "cost µ$"],
        [
            (
                r.routine_id,
                r.run_id,
                r.fire_at.astimezone(london).strftime("%d %H:%M %Z"),
                r.state,
                r.reason or "",
                r.cost_micros,
            )
            for r in keep
        ],
    )
    del echo


def celery_ticks(folder: Path, *, count: int = 3, echo: Any = print) -> list[dict[str, Any]]:
    """Part 3: real Celery ticks through the in-memory transport to an in-process worker (real time).

    A store of its own, with routines registered at the real now: the tick task clamps ``now`` to the
    worker clock and run messages carry real expiries, so nothing here is simulated.
    """
    import time

    try:
        from celery.contrib.testing.worker import start_worker
    except ModuleNotFoundError as exc:
        raise missing_extra(exc, "celery", CELERY_PARTS) from None

    from alma_schedule.celery import create_app
    from alma_schedule.engine import create_scheduler
    from alma_schedule.stores import migrate_store, open_store

    live = folder / "live"
    live.mkdir()
    settings = _settings(live, system_time, timedelta(minutes=1))
    migrate_store(settings.database_url, schema=settings.database_schema)
    store = open_store(settings.database_url, schema=settings.database_schema)
    registry = _registry(settings)
    setup = create_scheduler(store=store, runner=registry.resolve, settings=settings)
    echo(
        "The same engine behind real Celery tasks at real time: each `alma_schedule.tick` message claims\n"
        "what is due and the worker runs each fire's `alma_schedule.run`; the live heartbeat (`every 1s`)\n"
        "is claimed once per tick.\n"
    )
    for rid, sched in (("heartbeat", {"every": "1s"}), ("minutely", {"cron": "* * * * *"})):
        setup.register(RoutineSpec(SCOPE.org, SCOPE.uid, rid, "echo", sched, {}))
        echo(f"registered {rid} {json.dumps(sched)} at {system_time():%H:%M:%S}Z")
    app = create_app(settings, registry=registry)
    results: list[dict[str, Any]] = []
    with start_worker(
        app,
        pool="solo",
        perform_ping_check=False,
        shutdown_timeout=10,
        queues=[settings.tick_queue, settings.run_queue, settings.collect_queue],
    ):
        for _ in range(count):
            time.sleep(1.2)
            report = app.send_task(
                "alma_schedule.tick", queue=settings.tick_queue, expires=settings.tick_expires.total_seconds()
            ).get(timeout=30)
            results.append(report)
            echo(
                f"celery tick at {report['at'][11:19]}Z: claimed {report['claimed']}, resent {report['resent']}, "
                f"collect {report['collect']}, skipped {report['skipped']}, blocked {report['blocked']}, "
                f"errors {report['errors']}"
            )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(r.state == RunState.CLAIMED for r in store.list_runs(SCOPE)):
            time.sleep(0.1)  # the run messages are executed by the same in-process worker
    runs = store.list_runs(SCOPE)
    from alma_schedule.cli.context import print_table

    print_table(
        "the live ledger",
        ["routine", "run id", "state", "reason"],
        [(r.routine_id, r.run_id, r.state, r.reason or "") for r in runs],
    )
    store.close()
    return results
