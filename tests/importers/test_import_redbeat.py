"""import-redbeat on entries RedBeat itself saved on a real Redis (statics included): every field
compared, the cursor from last_run_at, nothing replayed, due at the next fire, re-runs change nothing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from celery import Celery
from celery.schedules import crontab, schedule
from click.testing import CliRunner

from alma_schedule.cli import cli
from alma_schedule.errors import SourceUnavailable, UnknownSourceSchema
from alma_schedule.importers.common import apply_plan
from alma_schedule.importers.redbeat import STATIC, plan_redbeat
from alma_schedule.runners.task import TaskRunner
from tests.importers.support import SCOPE, due_ids, fleet_app, routines, scheduler, whole

BASE = datetime(2026, 3, 10, 9, 40, tzinfo=UTC)
DAY_START = datetime(2026, 1, 1, 6, 0, tzinfo=UTC)
CLEANUP = "celery.backend_cleanup"  # RedBeat installs it as a static too (the app keeps results)


def save_entries(app: Celery) -> dict[str, Any]:
    """Entries saved by RedBeat (its own entry class and scheduler), read back by RedBeat."""
    from redbeat.schedulers import RedBeatScheduler, RedBeatSchedulerEntry
    from redbeat.schedules import rrule

    def save(name: str, sched: Any, last: datetime | None, **kw: Any) -> None:
        RedBeatSchedulerEntry(name, kw.pop("task", "proj.report"), sched, last_run_at=last, app=app, **kw).save()

    save("rb-cron", crontab(minute=15), BASE - timedelta(minutes=25), args=[1], options={"queue": "reports"})
    save("rb-every", schedule(run_every=300), BASE - timedelta(minutes=1), task="proj.cleanup", kwargs={"n": 2})
    save("rb-rrule", rrule("DAILY", dtstart=DAY_START, app=app), BASE.replace(hour=6, minute=0))
    save("rb-rrule-7", rrule("MINUTELY", interval=7, dtstart=DAY_START, app=app), BASE)
    save("rb-off", schedule(run_every=60), BASE, enabled=False)
    save("rb-routed", schedule(run_every=60), BASE, options={"queue": "reports", "exchange": "fanout-x"})
    RedBeatScheduler(app, lazy=True).setup_schedule()  # saves beat_schedule's "in-code" as a static
    prefix = app.redbeat_conf.key_prefix
    names = ["rb-cron", "rb-every", "rb-rrule", "rb-rrule-7", "rb-off", "rb-routed", "in-code", CLEANUP]
    return {n: RedBeatSchedulerEntry.from_key(prefix + n, app=app) for n in names}


@pytest.fixture
def redbeat_app(redis_url: str) -> Celery:
    app = fleet_app()
    app.conf.redbeat_redis_url = redis_url
    app.conf.timezone = "Europe/Paris"
    return app


def test_entries_saved_by_redbeat_import_field_by_field(redbeat_app: Celery, redis_url: str, tmp_path: Path) -> None:
    saved = save_entries(redbeat_app)
    runner = TaskRunner(redbeat_app)
    plan = plan_redbeat(redis_url, SCOPE, tz="Europe/Paris", runner=runner)
    entries = {e.name: e for e in plan.entries}
    assert sorted(entries) == sorted(saved)
    for name, entry in entries.items():
        if entry.spec is not None:
            assert entry.cursor == saved[name].last_run_at.astimezone(UTC)
            assert (entry.spec.source, entry.spec.source_entry) == ("import-redbeat", name)
    cron = entries["rb-cron"]
    assert cron.spec is not None and dict(cron.spec.schedule) == {"cron": "15 * * * *", "tz": "Europe/Paris"}
    assert dict(cron.spec.definition) == {"task": "proj.report", "args": [1], "options": {"queue": "reports"}}
    every = entries["rb-every"]
    assert every.spec is not None and dict(every.spec.schedule) == {"every": "5m"}
    assert dict(every.spec.definition) == {"task": "proj.cleanup", "kwargs": {"n": 2}}
    daily = entries["rb-rrule"]
    assert daily.spec is not None
    assert dict(daily.spec.schedule) == {"cron": "0 6 * * *", "tz": "UTC", "not_before": DAY_START.isoformat()}
    assert entries["rb-rrule-7"].spec is None and "interval 7" in (entries["rb-rrule-7"].refused or "")
    assert entries["rb-off"].spec is not None and not entries["rb-off"].enabled
    assert "exchange 'fanout-x'" in (entries["rb-routed"].refused or "")
    assert entries["in-code"].skipped == STATIC

    with scheduler(f"sqlite:///{tmp_path}/alma.sqlite3", redbeat_app) as sched:
        applied = {a.name: a.outcome for a in apply_plan(sched, plan, now=BASE)}
        assert applied == {
            "rb-cron": "created",
            "rb-every": "created",
            "rb-rrule": "created",
            "rb-rrule-7": "refused",
            "rb-off": "created",
            "rb-routed": "refused",
            "in-code": "skipped",
            CLEANUP: "refused",  # the allow-list never sends celery.* tasks
        }
        rows = routines(sched)
        assert sorted(rows) == ["rb-cron", "rb-every", "rb-off", "rb-rrule"]
        assert all(rows[n].last_fire == whole(saved[n].last_run_at.astimezone(UTC)) for n in rows)
        assert not rows["rb-off"].enabled
        assert all((r.source, r.source_entry) == ("import-redbeat", n) for n, r in rows.items())  # provenance
        assert not due_ids(sched, BASE)  # between each last run and its next fire: nothing replays
        assert "rb-cron" in due_ids(sched, BASE + timedelta(minutes=35))
        assert "rb-every" in due_ids(sched, BASE + timedelta(minutes=4))
        assert "rb-rrule" in due_ids(sched, BASE.replace(hour=6, minute=0) + timedelta(days=1))
        again = apply_plan(sched, plan_redbeat(redis_url, SCOPE, tz="Europe/Paris", runner=runner), now=BASE)
        assert {a.name: a.outcome for a in again if a.name in rows} == dict.fromkeys(rows, "unchanged")
        assert routines(sched) == rows


def test_the_cli_dry_run_lists_every_entry_and_writes_nothing(redbeat_app: Celery, redis_url: str) -> None:
    import redis

    save_entries(redbeat_app)
    client = redis.Redis.from_url(redis_url)
    before = {k: client.dump(k) for k in client.keys("*")}
    out = CliRunner().invoke(cli, ["import-redbeat", "--redis", redis_url, "acme/ops", "--tz", "Europe/Paris"])
    assert out.exit_code == 0, out.output
    assert "in-code" in out.output and "static entry" in out.output
    assert "5 entries convert, 2 refused, 1 skipped. Nothing written"  # no -A: nothing asked of the app in out.output
    assert {k: client.dump(k) for k in client.keys("*")} == before  # the source is never written to
    client.close()


def test_unreachable_redis_and_no_redbeat_keys_are_one_line(redis_url: str) -> None:
    with pytest.raises(SourceUnavailable, match=r"--redis redis://:\*\*\*@127\.0\.0\.1:1/0"):
        plan_redbeat("redis://:secret@127.0.0.1:1/0", SCOPE)
    with pytest.raises(UnknownSourceSchema, match="redbeat::schedule"):
        plan_redbeat(redis_url, SCOPE)
    out = CliRunner().invoke(cli, ["import-redbeat", "--redis", redis_url, "acme/ops", "--key-prefix", "other:"])
    assert out.exit_code == 1 and len(out.output.strip().splitlines()) == 1 and "other::schedule" in out.output


def test_a_solar_entry_becomes_the_solar_form(redis_url: str) -> None:
    import json

    import redis

    body = {"name": "dawn", "task": "proj.report", "schedule": {"__type__": "solar", "event": "sunrise", "lat": 48.85,
            "lon": 2.35}, "args": [], "kwargs": {}, "options": {}, "enabled": True}  # fmt: skip
    client = redis.Redis.from_url(redis_url)
    client.hset("redbeat:dawn", mapping={"definition": json.dumps(body), "meta": json.dumps({"last_run_at": None})})
    client.zadd("redbeat::schedule", {"redbeat:dawn": 0})
    client.close()
    (entry,) = plan_redbeat(redis_url, SCOPE).entries
    assert entry.spec is not None and dict(entry.spec.schedule) == {"solar": "sunrise", "lat": 48.85, "lon": 2.35}
    assert entry.cursor is None and entry.enabled  # never ran: due at once, as RedBeat runs it


def test_the_cli_applies_with_the_fleet_app_in_its_zone(redbeat_app: Celery, redis_url: str, tmp_path: Path) -> None:
    save_entries(redbeat_app)
    run = ["-A", "tests.importers.fleet:app", "--database-url", f"sqlite:///{tmp_path}/alma.sqlite3"]
    assert CliRunner().invoke(cli, [*run, "migrate"]).exit_code == 0
    args = [*run, "import-redbeat", "--redis", redis_url, "acme/ops", "--apply"]
    first = CliRunner().invoke(cli, args)
    assert first.exit_code == 0, first.output
    assert "times without a zone read in UTC: the app's enable_utc=True, no timezone" in first.output
    assert "4 created, 0 updated, 0 unchanged, 3 refused, 1 skipped" in first.output
    again = CliRunner().invoke(cli, args)
    assert "0 created, 0 updated, 4 unchanged, 3 refused, 1 skipped" in again.output
