"""The CLI commands that read or write the store, on SQLite and PostgreSQL, given hostile arguments:
each exits 0, or 1 with ONE ``error: ...`` line (a typed error), or 2 (click's usage error); never a
traceback, and after a refusal the store is unchanged (a dump of every table). Issue 14, defect 8.

(``serve-http``, ``clock run``, ``demo``, ``migrate`` and ``import-beat`` start servers, loops or
imports of the given module path: they are exercised by their own tests, not fed hostile text.)"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hostile_support import SCOPE, seeded
from hypothesis import given
from hypothesis import strategies as st

from alma_schedule.cli import cli
from alma_schedule.stores import open_store
from alma_schedule.stores.base import Store
from alma_schedule.stores.sql import migrate_store
from alma_schedule.testing.dump import dump_store
from alma_schedule.testing.hostile import HOSTILE, texts
from tests.stores.sql_support import fast_dir, pg_database

Draw = Callable[[st.SearchStrategy[Any]], Any]

TEXT = st.one_of(
    texts(),
    st.sampled_from(
        [
            "org-a/user-1",
            "r1",
            "r2",
            "1",
            "-1",
            "0",
            "99999999999999999999",
            "nan",
            "1e309",
            "9999-12-31T23:59:59Z",
            "0001-01-01T00:00:00+14:00",
            "2026-03-02T09:00:00",
            "@/dev/null",
            "@/nonexistent",
            "{}",
            "[]",
            "[" * 5000,
            '{"every": "1e300000"}',
            '{"every": 60}',
            '{"cron": "0 9 * * *", "x": ' + "[" * 40 + "]" * 40 + "}",
            "--help",
            "-h",
        ]
    ),
)
SCOPE_TEXT = st.one_of(st.just(str(SCOPE)), TEXT)
FLAG = st.sampled_from([[], ["--json"]])


def _args(draw: Draw, *parts: Any) -> list[str]:
    out: list[str] = []
    for part in parts:
        if isinstance(part, str):
            out.append(part)
        elif isinstance(part, list):
            out.extend(part)
        else:
            out.append(draw(part))
    return out + draw(FLAG)


COMMANDS: dict[str, Callable[[Draw], list[str]]] = {
    "schedule next": lambda d: _args(d, "schedule", "next", TEXT, "-n", st.sampled_from(["1", "3"]), "--after", TEXT),
    "routines add": lambda d: _args(
        d,
        "routines",
        "add",
        SCOPE_TEXT,
        TEXT,
        "--kind",
        st.sampled_from(["task", "turn", "job", "k", "x\x00"]),
        "--schedule",
        TEXT,
        "--definition",
        TEXT,
    ),
    "routines update": lambda d: _args(
        d, "routines", "update", SCOPE_TEXT, TEXT, "--schedule", TEXT, "--definition", TEXT, "--at", TEXT
    ),
    "routines list": lambda d: _args(d, "routines", "list", SCOPE_TEXT),
    "routines show": lambda d: _args(d, "routines", "show", SCOPE_TEXT, TEXT),
    "routines lever": lambda d: _args(
        d,
        "routines",
        st.sampled_from(["disable", "enable", "pause", "resume", "delete", "trigger"]),
        SCOPE_TEXT,
        TEXT,
    ),
    "routines next": lambda d: _args(d, "routines", "next", SCOPE_TEXT, TEXT),
    "runs list": lambda d: _args(d, "runs", "list", SCOPE_TEXT, "--routine", TEXT, "--since", TEXT),
    "runs stuck": lambda d: _args(d, "runs", "stuck", "--older-than", TEXT),
    "runs record": lambda d: _args(
        d, "runs", "record", SCOPE_TEXT, TEXT, TEXT, "--outcome", "failed", "--reason", TEXT
    ),
    "runs prune": lambda d: ["runs", "prune", "--before", d(TEXT)],
    "plan": lambda d: _args(d, "plan", "--at", TEXT),
    "tick": lambda d: _args(d, "tick", "--in-process", "--at", TEXT),
}


@pytest.fixture(scope="module", params=["sqlite", pytest.param("pg", marks=pytest.mark.postgres)])
def cli_store(request: pytest.FixtureRequest) -> Iterator[tuple[dict[str, str | None], Store]]:
    def seeded_url(url: str) -> Iterator[tuple[dict[str, str | None], Store]]:
        store = open_store(url)
        seeded(store)
        unset: dict[str, str | None] = {k: None for k in os.environ if k.startswith("ALMA_")}
        yield {**unset, "ALMA_DATABASE_URL": url, "ALMA_PROVIDER": "scripted", "ALMA_SINK": "stdout"}, store
        store.close()

    if request.param == "sqlite":
        with fast_dir() as path:
            url = f"sqlite:///{Path(path) / 'cli.sqlite3'}"
            migrate_store(url)
            yield from seeded_url(url)
        return
    with pg_database() as url:
        yield from seeded_url(url)


#: One well-formed call of each command above (each exits 0): the hostile calls reach the same code.
VALID: dict[str, list[str]] = {
    "schedule next": ["schedule", "next", '{"every": 60}', "-n", "1", "--after", "2026-03-02T09:00:00Z"],
    "routines add": [
        "routines",
        "add",
        "org-a/user-1",
        "cli-1",
        "--kind",
        "turn",
        "--schedule",
        '{"every": 60}',
        "--definition",
        '{"goal": "hello", "budget": {"per_turn_usd": "0.05"}}',
    ],
    "routines update": ["routines", "update", "org-a/user-1", "cli-1", "--definition", '{"goal": "v2"}'],
    "routines list": ["routines", "list", "org-a/user-1", "--json"],
    "routines show": ["routines", "show", "org-a/user-1", "r1"],
    "routines lever": ["routines", "disable", "org-a/user-1", "r2"],
    "routines next": ["routines", "next", "org-a/user-1", "r1"],
    "runs list": ["runs", "list", "org-a/user-1", "--routine", "r1", "--since", "2026-03-01T00:00:00Z"],
    "runs stuck": ["runs", "stuck", "--older-than", "1h"],
    "runs record": ["runs", "record", "org-a/user-1", "r1", "nope", "--outcome", "failed", "--reason", "reconciled"],
    "runs prune": ["runs", "prune", "--before", "2000-01-01T00:00:00Z"],
    "plan": ["plan", "--at", "2026-03-02T10:00:00Z"],
    "tick": ["tick", "--in-process", "--at", "2026-03-02T09:00:00Z"],
}


def test_a_well_formed_call_of_each_command_succeeds(
    cli_store: tuple[dict[str, str | None], Store], request: pytest.FixtureRequest
) -> None:
    env, _ = cli_store
    if not str(env["ALMA_DATABASE_URL"]).startswith("sqlite"):  # a production tick refuses memory:// (issue 45)
        env = {**env, "ALMA_BROKER_URL": request.getfixturevalue("redis_url")}
    assert set(VALID) == set(COMMANDS)
    for name, args in VALID.items():
        result = CliRunner().invoke(cli, args, env=env)
        expected = 1 if name == "runs record" else 0  # no such run: one typed line
        assert result.exit_code == expected, (args, result.output)


@pytest.mark.parametrize("command", list(COMMANDS))
@HOSTILE
@given(data=st.data())
def test_hostile_cli_arguments_are_accepted_or_refused_in_one_line(
    cli_store: tuple[dict[str, str | None], Store], command: str, data: st.DataObject
) -> None:
    env, store = cli_store
    args = COMMANDS[command](data.draw)
    before = dump_store(store)
    result = CliRunner().invoke(cli, args, env=env)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"{args!r} raised {type(result.exception).__name__}") from result.exception
    assert result.exit_code in (0, 1, 2), (args, result.exit_code, result.output)
    assert "Traceback" not in result.output
    if result.exit_code != 0:
        assert dump_store(store) == before, f"{args!r} was refused but changed the store"
    if result.exit_code == 1:
        errors = [line for line in result.output.splitlines() if line.startswith("error: ")]
        assert len(errors) == 1, result.output
