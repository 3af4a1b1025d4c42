"""PostgreSQL: a read of one run by its key goes through the primary key, even for a routine whose
ledger is long (revision ``0006_speed``'s functional-dependency statistics on the run key).

Without them the planner took (org, uid, routine_id) as independent conditions, priced the routine's
index ``ix_runs_routine_fire`` at one row like the primary key, and read the routine's whole ledger
with ``run_id`` as a filter (checked: with the statistics dropped, these tests fail).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest

from alma_schedule.model import RunKey
from alma_schedule.stores.postgres import hot
from alma_schedule.stores.sql import queries as q
from alma_schedule.testing.builders import T0
from tests.stores.sql_load import copy_routines, copy_runs, history_rows, routine_id
from tests.stores.sql_support import explain_plan, libpq_url, pg_database

pytestmark = pytest.mark.postgres

ROUTINES = 5_000
LONG_ROUTINES, LONG = 150, 60  # routines 0-149: 60 more fires each (more than the 100 MCV entries hold)


@pytest.fixture(scope="module")
def ledger() -> Iterator[str]:
    """5,000 routines with two finished runs each, 150 of them with 60 more, ANALYZEd."""
    with pg_database() as url:
        conninfo = libpq_url(url)
        copy_routines(conninfo, ROUTINES, 0, T0)
        copy_runs(conninfo, history_rows(ROUTINES, T0, per_routine=2))
        copy_runs(conninfo, history_rows(LONG_ROUTINES, T0 - timedelta(days=3), per_routine=LONG))
        with psycopg.connect(conninfo, autocommit=True) as conn:
            conn.execute("ANALYZE")
        yield conninfo


def _scans(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    if "Scan" in plan["Node Type"]:
        yield plan
    for child in plan.get("Plans", ()):
        yield from _scans(child)


def _key(conninfo: str) -> RunKey:
    """A run in the middle of the ledger of a long routine that is NOT among the most common values
    of ``routine_id`` (PostgreSQL keeps 100): the planner knows nothing of it but the averages."""
    with psycopg.connect(conninfo) as conn:
        row = conn.execute(
            "SELECT most_common_vals::text::text[] FROM pg_stats"
            " WHERE schemaname = 'alma' AND tablename = 'runs' AND attname = 'routine_id'"
        ).fetchone()
    common = set(row[0] or []) if row is not None else set()
    i = next(i for i in range(LONG_ROUTINES) if routine_id(i) not in common)
    fire = T0 - timedelta(days=3, minutes=10 + LONG // 2)
    return RunKey(f"org-{i % 100}", "user-1", routine_id(i), fire.strftime("%Y-%m-%dT%H:%M:%SZ"))


def test_the_statistics_exist(ledger: str) -> None:
    with psycopg.connect(ledger) as conn:
        row = conn.execute(
            "SELECT stxkind FROM pg_statistic_ext WHERE stxname = 'st_runs_routine'"
            " AND stxnamespace = 'alma'::regnamespace"
        ).fetchone()
    assert row is not None and row[0] == ["f"]  # functional dependencies


@pytest.mark.parametrize("mode", ["force_custom_plan", "force_generic_plan"])
@pytest.mark.parametrize("stmt", [q.SELECT_RUN, q.SELECT_RUN_LOCKED], ids=["read", "locked read"])
def test_a_run_of_a_long_ledger_is_read_through_the_primary_key(ledger: str, stmt: Any, mode: str) -> None:
    rendered = hot.rendered(stmt, "alma")  # the text SQLAlchemy sends, with $n placeholders
    key = _key(ledger)
    plan = explain_plan(ledger, rendered.sql, rendered.args(q.run_params(key)), mode=mode)
    scans = list(_scans(plan))
    assert [s.get("Index Name") for s in scans] == ["runs_pkey"], json.dumps(plan)
    with psycopg.connect(ledger) as conn:
        found = conn.execute(
            "SELECT count(*) FROM alma.runs WHERE org = %s AND uid = %s AND routine_id = %s AND run_id = %s",
            (key.org, key.uid, key.routine_id, key.run_id),
        ).fetchone()
    assert found == (1,)
