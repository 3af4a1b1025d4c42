"""The CLI's rough edges of issue 13 (point 9), each fixed, each shown here through the real click
group on SQLite and PostgreSQL: exit codes, one "not found" wording, the reason codes listed,
``reindex --json``, plain ``routines show``, one-line empty ``plan`` sections, ``routines add``
refusing an existing id (``--update`` / ``routines update``, the ``every`` anchor kept), the
"last run" column from the ledger beside the cursor, ``runs stuck`` and deadlines, and
``alma-schedule settings``."""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from alma_schedule.cli import cli
from alma_schedule.model import REASONS, RunKey, Scope
from alma_schedule.settings import FIELDS, env_name
from alma_schedule.stores import migrate_store, open_store

SCOPE = "acme/alice"
DEFINITION = json.dumps({"goal": "Morning briefing", "budget": {"per_turn_usd": {"usd": 0.05}}})
CRON = '{"cron": "0 8 * * *", "tz": "Europe/Lisbon"}'
PACKAGE = Path(__file__).resolve().parents[2] / "alma_schedule"


@pytest.fixture(params=["sqlite", "postgres"])
def env(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[dict[str, str]]:
    extra: dict[str, str] = {}
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path}/cli.sqlite3"
    else:
        url = request.getfixturevalue("pg_url")
        # a production store needs a real broker (memory:// is refused by every sender)
        extra["ALMA_BROKER_URL"] = request.getfixturevalue("redis_url")
    migrate_store(url)
    yield {"ALMA_DATABASE_URL": url, "ALMA_PROVIDER": "scripted", "ALMA_SINK": f"file:{tmp_path}/out.jsonl", **extra}


def run(env: dict[str, str], *args: str) -> Result:
    unset: dict[str, str | None] = {k: None for k in os.environ if k.startswith("ALMA_")}
    return CliRunner().invoke(cli, list(args), env={**unset, **env})


def ok(result: Result) -> str:
    assert result.exit_code == 0, result.output
    return result.stdout


def fails(result: Result) -> str:
    """Exit 1 with ONE line on stderr, no traceback; returns that line."""
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def add(env: dict[str, str], rid: str, schedule: str = CRON, *extra: str) -> Result:
    return run(env, "routines", "add", SCOPE, rid, "--kind", "turn", "--schedule", schedule,
               "--definition", DEFINITION, *extra)  # fmt: skip


def add_at(env: dict[str, str], rid: str, schedule: str, at: str, *extra: str) -> None:
    """Register ``rid`` as of ``at``: the CLI's ``--at`` on the embedded store; on a production store,
    which refuses ``--at`` (issue 45, item 8), through the engine, which still takes ``now``."""
    url = env["ALMA_DATABASE_URL"]
    if url.startswith("sqlite"):
        ok(add(env, rid, schedule, *extra, "--at", at))
        return
    from alma_schedule.engine import create_schedule
    from alma_schedule.model import RoutineSpec
    from alma_schedule.runners.registry import registry_resolver
    from alma_schedule.settings import load_settings

    settings = load_settings(environ={k: v for k, v in env.items() if k.startswith("ALMA_")})
    store = open_store(url)
    try:
        sched = create_schedule(store=store, runner=registry_resolver(settings), settings=settings)
        spec = RoutineSpec("acme", "alice", rid, "turn", json.loads(schedule), json.loads(DEFINITION))
        at_ = datetime.fromisoformat(at.replace("Z", "+00:00"))
        sched.register(spec, now=at_, mode="upsert" if "--update" in extra else "create")
    finally:
        store.close()


def show(env: dict[str, str], rid: str) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(ok(run(env, "routines", "show", SCOPE, rid, "--json")))
    return out


# ---------------------------------------------------------------- runs record


def test_record_of_nothing_exits_1_in_text_and_json_alike(env: dict[str, str], redis_url: str) -> None:
    env = {**env, "ALMA_BROKER_URL": redis_url}
    ok(add(env, "briefing"))
    args = ("runs", "record", SCOPE, "briefing")
    # an unknown run: nothing recorded, exit 1 either way; --json still prints the result first
    assert fails(run(env, *args, "nope", "--outcome", "failed")) == "error: not found: run acme/alice/briefing/nope"
    as_json = run(env, *args, "nope", "--outcome", "failed", "--json")
    assert fails(as_json) == "error: not found: run acme/alice/briefing/nope"
    assert json.loads(as_json.stdout) == {"won": False, "record": None, "reason": "not_found"}
    # a terminal run: recorded once (exit 0), then refused (exit 1) in both modes
    ok(run(env, "routines", "trigger", SCOPE, "briefing"))
    [first] = json.loads(ok(run(env, "runs", "list", SCOPE, "--json")))
    if first["state"] != "completed":  # production store: the run waits in the broker; reconcile it
        recorded = json.loads(ok(run(env, *args, first["run_id"], "--outcome", "failed", "--json")))
        assert recorded["won"] is True and recorded["record"]["state"] == "failed"
    text = fails(run(env, *args, first["run_id"], "--outcome", "failed"))
    assert "only buffered, claimed, collecting, running, submitted runs can be recorded" in text
    again = run(env, *args, first["run_id"], "--outcome", "failed", "--json")
    assert fails(again) == text
    assert json.loads(again.stdout)["won"] is False


def test_a_refused_reason_code_lists_the_valid_ones(env: dict[str, str]) -> None:
    ok(add(env, "briefing"))
    line = fails(run(env, "runs", "record", SCOPE, "briefing", "r1", "--outcome", "failed", "--reason", "oops"))
    assert "reason 'oops' is not a known reason code (one of: " in line
    listed = set(line.split("(one of: ", 1)[1].rstrip(")").split(", "))
    assert listed == REASONS
    help_text = ok(run({}, "runs", "record", "--help"))
    assert "provider_error" in help_text and "reconciled" in help_text


# ---------------------------------------------------------------- not found


def test_not_found_has_one_wording_everywhere(env: dict[str, str]) -> None:
    ok(add(env, "briefing"))
    expected = "error: not found: routine acme/alice/nope"
    for args in (
        ("routines", "show", SCOPE, "nope"),
        ("routines", "next", SCOPE, "nope"),
        ("routines", "update", SCOPE, "nope", "--schedule", CRON),
        ("routines", "disable", SCOPE, "nope"),
        ("routines", "enable", SCOPE, "nope"),
        ("routines", "pause", SCOPE, "nope"),
        ("routines", "resume", SCOPE, "nope"),
        ("routines", "delete", SCOPE, "nope"),
        ("routines", "trigger", SCOPE, "nope"),
    ):
        assert fails(run(env, *args)) == expected, args
    run_line = fails(run(env, "runs", "record", SCOPE, "briefing", "r9", "--outcome", "failed"))
    assert run_line == "error: not found: run acme/alice/briefing/r9"


def test_every_not_found_in_the_package_goes_through_the_one_wording() -> None:
    offenders = [
        f"{path.relative_to(PACKAGE)}:{n}"
        for path in PACKAGE.rglob("*.py")
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if re.search(r"\bNotFound\(", line) and "class NotFound" not in line
    ]
    assert offenders == []  # raise NotFound.of("routine" | "run", name), never a message of its own


# ---------------------------------------------------------------- reindex, show, plan


def test_reindex_has_json(env: dict[str, str]) -> None:
    assert json.loads(ok(run(env, "reindex", "--json"))) == {"changed": 0}
    ok(add(env, "briefing"))
    due = show(env, "briefing")["next_due_at"]
    store = open_store(env["ALMA_DATABASE_URL"])
    try:  # an index that drifted (as after a tzdata update) is re-derived and counted
        routine = store.get_routine(Scope.parse(SCOPE), "briefing")
        assert routine is not None
        drifted = dataclasses.replace(routine, next_due_at=datetime(2099, 1, 1, tzinfo=UTC))
        store.put_routine(drifted, now=datetime.now(UTC), expected_revision=routine.config_revision)
    finally:
        store.close()
    assert show(env, "briefing")["next_due_at"] == "2099-01-01T00:00:00+00:00"
    assert json.loads(ok(run(env, "reindex", "--json"))) == {"changed": 1}
    assert show(env, "briefing")["next_due_at"] == due
    assert ok(run(env, "reindex")) == "reindexed: 0 routine(s) changed\n"


def test_routines_show_prints_json_and_iso_values(env: dict[str, str]) -> None:
    add_at(env, "briefing", CRON, "2026-01-05T10:00:00Z")
    out = ok(run(env, "routines", "show", SCOPE, "briefing"))
    assert '{"cron": "0 8 * * *", "tz": "Europe/Lisbon"}' in out  # the schedule as JSON
    assert '"goal": "Morning briefing"' in out
    assert "{'" not in out and "datetime.datetime" not in out and "None" not in out and "True" not in out
    assert re.search(r"registered_at\s+│\s+2026-01-05T10:00:00\+00:00", out)
    assert re.search(r"enabled\s+│\s+true", out)


def test_plan_empty_sections_are_one_line_each(env: dict[str, str]) -> None:
    out = ok(run(env, "plan", "--at", "2099-01-01T09:00:00Z"))
    for section in ("due", "re-send", "expire (skipped: missed)", "poll (collect)", "skipped", "paused / disabled"):
        assert f"\n{section}: none\n" in out, section
    assert "blocked (stuck runs): none" in out
    assert "┏" not in out and "+--" not in out  # no table at all
    ok(add(env, "briefing"))
    due = ok(run(env, "plan", "--at", "2099-01-01T09:00:00Z"))
    assert "due: none" not in due and "acme/alice/briefing" in due  # the one non-empty section is a table
    assert "re-send: none" in due


# ---------------------------------------------------------------- add / update


def test_add_of_an_existing_id_is_refused_unless_update(env: dict[str, str]) -> None:
    ok(add(env, "briefing"))
    before = show(env, "briefing")
    line = fails(add(env, "briefing", '{"cron": "0 9 * * *"}'))
    assert line == (
        "error: routine acme/alice/briefing already exists: "
        "change it with `routines update` (or `routines add --update`)"
    )
    assert show(env, "briefing") == before  # nothing written
    out = ok(add(env, "briefing", '{"cron": "0 9 * * *"}', "--update"))
    assert out.startswith("updated acme/alice/briefing")
    assert show(env, "briefing")["schedule"] == {"cron": "0 9 * * *"}
    assert ok(add(env, "fresh", CRON, "--update")).startswith("registered acme/alice/fresh")  # an upsert
    # `routines update` changes only what it is given, and only an existing routine
    ok(run(env, "routines", "update", SCOPE, "briefing", "--definition", '{"goal": "g", "budget": {}}'))
    after = show(env, "briefing")
    assert after["definition"] == {"goal": "g", "budget": {}} and after["schedule"] == {"cron": "0 9 * * *"}
    assert after["kind"] == "turn"
    # a deleted id is free again: add creates it afresh
    ok(run(env, "routines", "delete", SCOPE, "briefing"))
    assert fails(run(env, "routines", "update", SCOPE, "briefing", "--schedule", CRON)).startswith("error: not found")
    assert ok(add(env, "briefing")).startswith("registered acme/alice/briefing")


def test_update_keeps_the_every_anchor_unless_the_interval_changes(env: dict[str, str]) -> None:
    if not env["ALMA_DATABASE_URL"].startswith("sqlite"):  # the engine's own tests cover the anchor there
        pytest.skip("--at is refused on a production store (issue 45, item 8); the anchor is shown on SQLite")
    t0, t1, t2 = "2026-01-05T10:00:07Z", "2026-01-05T12:30:00Z", "2026-01-05T13:00:00Z"
    ok(add(env, "hourly", '{"every": "1h"}', "--at", t0))
    anchor = show(env, "hourly")["registered_at"]
    assert anchor == "2026-01-05T10:00:07+00:00"
    # a definition change, and the same interval spelled otherwise: the anchor stays
    ok(run(env, "routines", "update", SCOPE, "hourly", "--definition", '{"goal": "g", "budget": {}}', "--at", t1))
    ok(run(env, "routines", "update", SCOPE, "hourly", "--schedule", '{"every": "60m"}', "--at", t1))
    assert show(env, "hourly")["definition"] == {"goal": "g", "budget": {}}
    ok(add(env, "hourly", '{"every": "3600s"}', "--update", "--at", t1))  # the definition back, same interval
    kept = show(env, "hourly")
    assert kept["registered_at"] == anchor and kept["definition"] == json.loads(DEFINITION)
    assert kept["next_due_at"] == "2026-01-05T11:00:07+00:00"  # still on the anchor's grid
    # a new interval re-anchors at the update
    receipt = json.loads(
        ok(run(env, "routines", "update", SCOPE, "hourly", "--schedule", '{"every": "2h"}', "--at", t2, "--json"))
    )
    assert receipt["changed"] is True
    assert show(env, "hourly")["registered_at"] == "2026-01-05T13:00:00+00:00"


def test_import_beat_apply_stays_idempotent_beside_add(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/beat.sqlite3"
    migrate_store(url)
    env = {"ALMA_DATABASE_URL": url}
    first = ok(run(env, "import-beat", "tests.beat.fleet_app:app", "acme/ops", "--apply", "--json"))
    outcomes = [a["outcome"] for a in json.loads(first)["applied"]]
    assert outcomes.count("created") == 8  # every entry but the custom schedule class (solar converts)
    sync = json.loads(ok(run(env, "routines", "show", "acme/ops", "sync", "--json")))
    # the operator cannot re-add an imported id by accident ...
    line = fails(run(env, "routines", "add", "acme/ops", "sync", "--kind", "task", "--schedule", '{"every": "1m"}'))
    assert "already exists" in line
    # ... and import-beat still updates (here: re-applies unchanged) the routines it created
    again = json.loads(ok(run(env, "import-beat", "tests.beat.fleet_app:app", "acme/ops", "--apply", "--json")))
    assert {a["outcome"] for a in again["applied"]} == {"unchanged", "refused"}
    assert json.loads(ok(run(env, "routines", "show", "acme/ops", "sync", "--json"))) == sync


# ---------------------------------------------------------------- last run vs cursor


def test_list_shows_the_last_scheduled_run_beside_the_cursor(env: dict[str, str], redis_url: str) -> None:
    env = {**env, "ALMA_BROKER_URL": redis_url}
    add_at(env, "hourly", '{"every": "1h"}', "2026-01-05T10:00:00Z")
    listing = ok(run(env, "routines", "list", SCOPE))
    assert "last run (fire, state)" in listing and "cursor" in listing and "last fire" not in listing
    ok(run(env, "tick", "--in-process"))  # claims the latest due fire of the hourly grid
    [claimed] = json.loads(ok(run(env, "runs", "list", SCOPE, "--json")))
    assert claimed["origin"] == "schedule"
    if claimed["state"] == "claimed":  # production store: reconcile it so a manual trigger is allowed
        ok(run(env, "runs", "record", SCOPE, "hourly", claimed["run_id"], "--outcome", "failed"))
    ok(run(env, "routines", "pause", SCOPE, "hourly"))
    ok(run(env, "routines", "resume", SCOPE, "hourly"))  # moves the cursor to now, fires nothing
    ok(run(env, "routines", "trigger", SCOPE, "hourly"))  # a manual run is not a schedule fire
    routine = show(env, "hourly")
    assert routine["last_fire"] != claimed["fire_at"]  # the cursor is the resume instant
    row = next(line for line in ok(run(env, "routines", "list", SCOPE)).splitlines() if "hourly" in line)
    assert claimed["fire_at"] in row and routine["last_fire"] in row
    assert row.index(claimed["fire_at"]) < row.index(routine["last_fire"])  # "last run" before "cursor"
    shown = ok(run(env, "routines", "show", SCOPE, "hourly"))
    assert re.search(r"last run \(fire, state\)\s+│\s+" + re.escape(claimed["fire_at"]), shown)


# ---------------------------------------------------------------- runs stuck


def _stage_runs(url: str, now: datetime) -> None:
    """``late``: submitted 1h ago, deadline 30 min ago. ``slow``: running for 11 minutes."""
    store = open_store(url)
    try:
        scope = Scope.parse(SCOPE)
        late, slow = RunKey.of(scope, "late", "manual:late"), RunKey.of(scope, "slow", "manual:slow")
        for key, at in ((late, now - timedelta(hours=1)), (slow, now - timedelta(minutes=11))):
            later = at + timedelta(hours=1)
            claim = store.claim_manual(key, now=at, expires_at=later, resend_at=later)
            assert claim.won, claim
            assert store.start(key, now=at).won
        submitted = store.submit(
            late,
            now=now - timedelta(hours=1),
            batch_id="b1",
            deadline=now - timedelta(minutes=30),
            next_poll_at=now + timedelta(hours=1),
        )
        assert submitted.won
    finally:
        store.close()


def _stuck(env: dict[str, str], *args: str) -> set[str]:
    return {r["routine_id"] for r in json.loads(ok(run(env, "runs", "stuck", *args, "--json")))}


def test_runs_stuck_deadline_and_default_age(env: dict[str, str]) -> None:
    ok(add(env, "late"))
    ok(add(env, "slow"))
    _stage_runs(env["ALMA_DATABASE_URL"], datetime.now(UTC).replace(microsecond=0))
    # a submitted run past its deadline is stuck whatever --older-than
    assert _stuck(env, "--older-than", "30d") == {"late"}
    assert _stuck(env, "--older-than", "5m") == {"late", "slow"}
    # the default age is 2 x ALMA_RUN_TIME_LIMIT (what a tick reports as blocked)
    assert _stuck({**env, "ALMA_RUN_TIME_LIMIT": "5m"}) == {"late", "slow"}
    assert _stuck({**env, "ALMA_RUN_TIME_LIMIT": "10m"}) == {"late"}
    help_text = " ".join(ok(run({}, "runs", "stuck", "--help")).split())
    assert "default twice ALMA_RUN_TIME_LIMIT" in help_text and "past its deadline is stuck whatever" in help_text
    table = ok(run(env, "runs", "stuck", "--older-than", "30d"))
    assert "acme/alice/late" in table and "slow" not in table


def test_runs_stuck_empty_is_one_line(env: dict[str, str]) -> None:
    out = ok(run({**env, "ALMA_RUN_TIME_LIMIT": "5m"}, "runs", "stuck"))
    assert out == "runs stuck longer than 600s (or blocked at once, or submitted past their deadline): none\n"


# ---------------------------------------------------------------- settings


def test_settings_lists_every_alma_variable_with_default_and_doc() -> None:
    documented = [n for n, f in FIELDS.items() if f.metadata.get("kind") != "code"]
    rows = json.loads(ok(run({}, "settings", "--json")))
    assert [r["env"] for r in rows] == [env_name(n) for n in documented]
    by_env = {r["env"]: r for r in rows}
    assert by_env["ALMA_TICK_PERIOD"]["default"] == "60s"
    assert by_env["ALMA_RESULT_BACKEND"]["default"] == "(none)"
    assert by_env["ALMA_TASK_EVENTS"]["default"] == "true"
    assert by_env["ALMA_DATABASE_URL"]["doc"] == FIELDS["database_url"].metadata["doc"]
    assert "ALMA_CLOCK" not in by_env  # code only
    table = ok(run({}, "settings"))
    assert all(env_name(n) in table for n in documented)


def test_settings_runs_even_with_a_wrong_variable() -> None:
    # the command an unknown-variable error points to must work in that very environment
    out = ok(run({"ALMA_DATABSE_URL": "x", "ALMA_TICK_PERIOD": "soon"}, "settings"))
    assert "ALMA_DATABASE_URL" in out
    assert run({"ALMA_DATABSE_URL": "x"}, "routines", "list", SCOPE).exit_code == 1
