"""Issue 45, items 7 and 8, through the real click group: ``--definition @FILE`` (and
``--schedule @FILE``) read at most ``max_definition_bytes`` (``max_schedule_bytes``) + 1 bytes
and refuse past it with one line naming the setting (``@/dev/zero`` was killed by the OOM killer);
``--at`` back-dates a registration, so a production store (PostgreSQL) refuses it with one line
naming ``--at`` and writes nothing."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from alma_schedule.cli import cli
from alma_schedule.model import Scope
from alma_schedule.stores import open_store

SCOPE = "acme/alice"
TURN = {"ALMA_PROVIDER": "scripted", "ALMA_SINK": "stdout"}
CRON = '{"cron": "0 8 * * *"}'
DEFINITION = json.dumps({"goal": "brief", "budget": {"per_turn_usd": {"usd": 0.05}}})


def run(env: dict[str, str], *args: str) -> Result:
    unset: dict[str, str | None] = {k: None for k in os.environ if k.startswith("ALMA_")}
    return CliRunner().invoke(cli, list(args), env={**unset, **env})


def one_line(result: Result) -> str:
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="needs /dev/zero")
def test_definition_from_dev_zero_is_refused_naming_the_setting(migrated_sqlite_url: str) -> None:
    env = {"ALMA_DATABASE_URL": migrated_sqlite_url}
    line = one_line(
        run(env, "routines", "add", SCOPE, "r", "--kind", "turn", "--schedule", CRON, "--definition", "@/dev/zero")
    )
    assert "ALMA_MAX_DEFINITION_BYTES" in line and "/dev/zero" in line and "--definition" in line
    line = one_line(run(env, "routines", "add", SCOPE, "r", "--kind", "turn", "--schedule", "@/dev/zero"))
    assert "ALMA_MAX_SCHEDULE_BYTES" in line


def test_a_definition_file_over_the_limit_is_refused_and_one_at_it_is_read(
    migrated_sqlite_url: str, tmp_path: Path
) -> None:
    env = {"ALMA_DATABASE_URL": migrated_sqlite_url, "ALMA_MAX_DEFINITION_BYTES": "1000", **TURN}
    big = tmp_path / "big.json"
    big.write_text(json.dumps({"goal": "x" * 50_000_000}))  # 50 MB
    line = one_line(
        run(env, "routines", "add", SCOPE, "r", "--kind", "turn", "--schedule", CRON, "--definition", f"@{big}")
    )
    assert line == f"error: --definition: {str(big)!r} is larger than ALMA_MAX_DEFINITION_BYTES (1000 bytes)"
    fits = tmp_path / "fits.json"
    fits.write_text(json.dumps({"goal": "x" * 900, "budget": {"per_turn_usd": {"usd": 0.05}}}))
    assert fits.stat().st_size <= 1000
    result = run(env, "routines", "add", SCOPE, "r", "--kind", "turn", "--schedule", CRON, "--definition", f"@{fits}")
    assert result.exit_code == 0, result.output
    store = open_store(migrated_sqlite_url)
    try:
        routine = store.get_routine(Scope.parse(SCOPE), "r")
        assert routine is not None and routine.definition["goal"] == "x" * 900
    finally:
        store.close()


def test_at_is_refused_on_a_production_store_and_nothing_is_written(migrated_pg_url: str, redis_url: str) -> None:
    env = {"ALMA_DATABASE_URL": migrated_pg_url, "ALMA_BROKER_URL": redis_url, **TURN}
    past = "2020-01-01T00:00:00Z"
    for args in (
        (
            "routines",
            "add",
            SCOPE,
            "r",
            "--kind",
            "turn",
            "--schedule",
            '{"every": 3600}',
            "--definition",
            DEFINITION,
            "--at",
            past,
        ),
        (
            "routines",
            "add",
            SCOPE,
            "r",
            "--kind",
            "turn",
            "--schedule",
            '{"every": 3600}',
            "--definition",
            DEFINITION,
            "--update",
            "--at",
            past,
        ),
        ("routines", "update", SCOPE, "r", "--schedule", '{"every": 60}', "--at", past),
    ):
        line = one_line(run(env, *args))
        assert line.startswith("error: --at is only for the embedded store"), line
    store = open_store(migrated_pg_url)
    try:
        assert store.get_routine(Scope.parse(SCOPE), "r") is None
    finally:
        store.close()
    # without --at the same registration is accepted, at the store's own now
    ok = run(
        env,
        "routines",
        "add",
        SCOPE,
        "r",
        "--kind",
        "turn",
        "--schedule",
        '{"every": 3600}',
        "--definition",
        DEFINITION,
    )
    assert ok.exit_code == 0, ok.output


def test_at_still_back_dates_on_the_embedded_store(migrated_sqlite_url: str) -> None:
    env = {"ALMA_DATABASE_URL": migrated_sqlite_url, **TURN}
    at = "2020-01-01T00:00:00Z"
    result = run(
        env,
        "routines",
        "add",
        SCOPE,
        "r",
        "--kind",
        "turn",
        "--schedule",
        '{"every": 3600}',
        "--definition",
        DEFINITION,
        "--at",
        at,
    )
    assert result.exit_code == 0, result.output
    store = open_store(migrated_sqlite_url)
    try:
        routine = store.get_routine(Scope.parse(SCOPE), "r")
        assert routine is not None and routine.registered_at.isoformat().startswith("2020-01-01T00:00:00")
    finally:
        store.close()
