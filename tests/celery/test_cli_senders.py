"""Our commands from a fleet's folder: ``-A/--app`` (and ``ALMA_CELERY_APP``) sends through the fleet's
app; every sender refuses a production store on the ``memory://`` broker in one line; a ``task``
kind that cannot import its app says why; ``alma-schedule settings`` lists every setting."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import redis
from fleet_project import alma, clean_env, one_line_error, write_fleet

from alma_schedule.settings import FIELDS, conf_name, env_name

pytestmark = [pytest.mark.redis]

TURN = ["--kind", "turn", "--schedule", '{"every": "1h"}', "--definition", '{"goal": "g"}']
ADDS = ["--kind", "task", "--schedule", '{"every": "1h"}', "--definition", '{"task": "fleet.add"}']


@pytest.mark.postgres
def test_every_sender_refuses_a_production_store_on_the_memory_broker(tmp_path: Path, pg_url: str) -> None:
    env = clean_env(ALMA_DATABASE_URL=pg_url, ALMA_PROVIDER="scripted", ALMA_SINK="stdout")
    assert alma(tmp_path, "migrate", env=env).returncode == 0
    added = alma(tmp_path, "routines", "add", "acme/alice", "r", *TURN, env=env)
    assert added.returncode == 0, added.stderr
    for args in (
        ["tick"],
        ["tick", "--json"],
        ["tick", "--in-process", "--json"],  # it would claim, then send nowhere (issue 45, item 12)
        ["clock", "send"],
        ["clock", "run"],
        ["clock", "run", "--every", "1s"],
        ["routines", "trigger", "acme/alice", "r"],
    ):
        line = one_line_error(alma(tmp_path, *args, env=env))
        assert "ALMA_DATABASE_URL" in line and "ALMA_BROKER_URL is memory://" in line, args
    listed = alma(tmp_path, "runs", "list", "acme/alice", "--json", env=env)
    assert json.loads(listed.stdout) == []  # the refused trigger and tick wrote nothing


@pytest.mark.postgres
def test_dash_a_sends_through_the_fleets_app_with_no_broker_or_celery_app_variable(
    tmp_path: Path, pg_url: str, redis_url: str
) -> None:
    root = write_fleet(tmp_path / "proj", broker=redis_url, conf={"alma_database_url": pg_url})
    env = clean_env()
    for args in (["migrate"], ["routines", "add", "acme/ops", "adds", *ADDS], ["tick", "--json"], ["clock", "send"]):
        done = alma(root, "-A", "fleet", *args, env=env)
        assert done.returncode == 0, (args, done.stderr)
    fallback = alma(root, "clock", "send", env=clean_env(ALMA_CELERY_APP="fleet"))
    assert fallback.returncode == 0, fallback.stderr
    trigger = alma(root, "--app", "fleet:app", "routines", "trigger", "acme/ops", "adds", env=env)
    assert trigger.returncode == 0, trigger.stderr
    r = redis.Redis.from_url(redis_url)
    ticks = [json.loads(m) for m in r.lrange("alma.tick", 0, -1)]
    assert len(ticks) == 3 and {t["headers"]["task"] for t in ticks} == {"alma_schedule.tick"}
    assert {t["content-type"] for t in ticks} == {"application/json"}
    assert r.llen("alma.run") == 1


def test_dash_a_with_a_memory_broker_app_is_refused_naming_the_apps_broker(tmp_path: Path) -> None:
    conf = {"alma_database_url": "postgresql+psycopg://alma@127.0.0.1:1/none"}
    root = write_fleet(tmp_path / "proj", broker="memory://", conf=conf)
    line = one_line_error(alma(root, "-A", "fleet", "clock", "send", env=clean_env()))
    assert "ALMA_DATABASE_URL" in line and "the broker_url of the Celery app 'fleet' is memory://" in line


def test_a_task_kind_that_cannot_import_the_fleet_app_says_why(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path}/s.sqlite3"
    root = tmp_path / "proj"
    root.mkdir()
    assert alma(root, "migrate", env=clean_env(ALMA_DATABASE_URL=store)).returncode == 0
    env = clean_env(ALMA_DATABASE_URL=store, ALMA_CELERY_APP="fleet:app")  # -A's fallback, as CELERY_APP
    line = one_line_error(alma(root, "routines", "add", "acme/ops", "adds", *ADDS, env=env))
    assert "No module named 'fleet'" in line and "ALMA_CELERY_APP" in line
    missing = one_line_error(alma(root, "-A", "nosuchfleet", "routines", "list", "acme/ops", env=env))
    assert "-A/--app: cannot import 'nosuchfleet': No module named 'nosuchfleet'" in missing
    write_fleet(root, broker="redis://127.0.0.1:6379/15")
    added = alma(root, "routines", "add", "acme/ops", "adds", *ADDS, env=env)  # the folder is on the path
    assert added.returncode == 0, added.stderr


def test_the_settings_command_lists_every_setting_an_unknown_one_points_to(tmp_path: Path) -> None:
    done = alma(tmp_path, "settings", "--json", env=clean_env(ALMA_FOO="1"))  # works while broken
    assert done.returncode == 0, done.stderr
    listed = json.loads(done.stdout)
    settable = [n for n, f in FIELDS.items() if f.metadata.get("kind") != "code"]
    assert [e["env"] for e in listed] == [env_name(n) for n in settable]
    assert [e["app_key"] for e in listed] == [conf_name(n) for n in settable]
    table = alma(tmp_path, "settings", env=clean_env())
    assert "ALMA_DATABASE_URL" in table.stdout and "alma_database_url" in table.stdout
    refused = one_line_error(alma(tmp_path, "routines", "list", "a/b", env=clean_env(ALMA_DATABSE_URL="x")))
    assert "did you mean ALMA_DATABASE_URL?" in refused and "`alma-schedule settings`" in refused
