"""Issue 44: the fires a claim collapsed (no run row) are shown by every CLI surface: ``routines list``
(the "missed fires" column, ``--json``), ``routines describe``, ``plan`` (what the next claim would
collapse), ``tick`` (the tick's count); ``10,000+`` once a claim counted its cap. Through the real
click group on the embedded SQLite store, ticking at given instants."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from alma_schedule.cli import cli
from alma_schedule.stores import migrate_store

SCOPE = "acme/alice"
T = "2026-01-05T10:00:00Z"


@pytest.fixture
def env(tmp_path: Path) -> Iterator[dict[str, str]]:
    url = f"sqlite:///{tmp_path}/cli.sqlite3"
    migrate_store(url)
    yield {"ALMA_DATABASE_URL": url, "ALMA_PROVIDER": "scripted", "ALMA_SINK": f"file:{tmp_path}/out.jsonl"}


def run(env: dict[str, str], *args: str) -> str:
    unset: dict[str, str | None] = {k: None for k in os.environ if k.startswith("ALMA_")}
    result: Result = CliRunner().invoke(cli, list(args), env={**unset, **env})
    assert result.exit_code == 0, result.output
    return result.stdout


def cells(table: str, name: str) -> dict[str, str]:
    """The row of ``name`` in a printed table, by column header."""
    header = [c.strip() for c in next(line for line in table.splitlines() if "┃" in line).split("┃")]
    row = next(line for line in table.splitlines() if "│" in line and f" {name} " in line)
    return dict(zip(header, (c.strip() for c in row.split("│")), strict=True))


def add(env: dict[str, str], rid: str, at: str) -> None:
    definition = json.dumps({"goal": "Morning briefing", "budget": {"per_turn_usd": {"usd": 0.05}}})
    run(env, "routines", "add", SCOPE, rid, "--kind", "turn", "--schedule", '{"every": "1m"}', "--at", at,
        "--definition", definition)  # fmt: skip


def test_every_surface_shows_the_fires_collapsed_by_downtime(env: dict[str, str]) -> None:
    add(env, "minutely", T)
    add(env, "month", "2025-12-06T10:00:00Z")  # never ticked since: a month of minutes
    assert "missed fires" in run(env, "routines", "list", SCOPE)
    # the plan says what the claim would collapse: 10:01 .. 10:09 (the 10:10 fire is claimed)
    plan = run(env, "plan", "--at", "2026-01-05T10:10:00Z")
    assert cells(plan, "acme/alice/minutely")["missed"] == "9"
    assert cells(plan, "acme/alice/month")["missed"] == "10,000+"
    due = {
        d["routine_id"]: d["fires_missed"]
        for d in json.loads(run(env, "plan", "--at", "2026-01-05T10:10:00Z", "--json"))["due"]
    }
    assert due == {"minutely": 9, "month": 10_000}
    report = json.loads(run(env, "tick", "--at", "2026-01-05T10:10:00Z", "--json"))
    assert (report["claimed"], report["fires_missed"]) == (2, 10_009)
    listing = run(env, "routines", "list", SCOPE)
    assert cells(listing, "minutely")["missed fires"] == "9"
    assert cells(listing, "month")["missed fires"] == "10,000+"
    rows = {r["routine_id"]: r for r in json.loads(run(env, "routines", "list", SCOPE, "--json"))}
    assert (rows["minutely"]["fires_missed"], rows["minutely"]["fires_missed_capped"]) == (9, False)
    assert (rows["month"]["fires_missed"], rows["month"]["fires_missed_capped"]) == (10_000, True)
    # a steady tick collapses nothing; the next downtime adds to the count
    assert "missed fires 0," in run(env, "tick", "--at", "2026-01-05T10:11:00Z")
    assert "missed fires 8," in run(env, "tick", "--at", "2026-01-05T10:16:00Z")  # 4 each
    described = run(env, "routines", "describe", SCOPE, "minutely")
    assert cells(described, "missed fires (never claimed)")["value"] == "13"
    assert cells(run(env, "routines", "describe", SCOPE, "month"), "missed fires (never claimed)")["value"] == "10,004+"
    view = json.loads(run(env, "routines", "describe", SCOPE, "month", "--json"))
    assert (view["fires_missed"], view["fires_missed_capped"]) == (10_004, True)
    everyone = run(env, "routines", "list", "--all")
    assert cells(everyone, "minutely")["missed fires"] == "13"


def test_a_pause_is_not_counted(env: dict[str, str]) -> None:
    add(env, "minutely", T)
    run(env, "tick", "--at", "2026-01-05T10:01:00Z")
    run(env, "routines", "pause", SCOPE, "minutely")  # now: months of minutes after the last claim
    run(env, "routines", "resume", SCOPE, "minutely")  # the cursor restarts at now
    after = (datetime.now(UTC) + timedelta(seconds=60)).isoformat()  # the first fire after the resume
    assert "claimed 1," in (ticked := run(env, "tick", "--at", after)) and "missed fires 0," in ticked
    assert cells(run(env, "routines", "list", SCOPE), "minutely")["missed fires"] == "0"
