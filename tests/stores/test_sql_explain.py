"""The tick's statements cost O(due), not O(routines): their GENERIC plans use the indexes.

20,000 routines (1,000 due) and 20,000 ledger rows plus a few hundred open runs are loaded and
ANALYZEd, so that without the partial indexes the planner would scan the tables. ``claim_due``,
``take_resends`` and ``take_polls`` then run for real; every statement they issue is captured as
issued (text and parameters), PREPAREd under ``plan_cache_mode = force_generic_plan`` (the plan a
prepared statement reuses whatever the parameters) and EXPLAINed. No plan may scan ``routines`` or
``runs`` sequentially, and each reads one of them through an index.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa

from alma_schedule.model import ClaimScan
from alma_schedule.stores.sql import SqlStore
from alma_schedule.testing.builders import TIMERS, fire_next_due
from tests.stores.sql_load import copy_routines, copy_runs, history_rows, open_rows
from tests.stores.sql_support import explain_plan, libpq_url, opened, pg_database, plan_nodes

pytestmark = pytest.mark.postgres

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
ROUTINES, DUE = 20_000, 1_000
TABLES = {"routines", "runs"}


@pytest.fixture(scope="module")
def loaded() -> Iterator[tuple[str, SqlStore]]:
    with pg_database() as url, opened(url) as store:
        conninfo = libpq_url(url)
        copy_routines(conninfo, ROUTINES, DUE, NOW)
        copy_runs(conninfo, history_rows(ROUTINES, NOW))
        copy_runs(conninfo, open_rows(range(19_000, 19_300), "claimed", NOW, due=True))
        copy_runs(conninfo, open_rows(range(19_300, 19_600), "submitted", NOW, due=True))
        copy_runs(conninfo, open_rows(range(19_600, 19_800), "claimed", NOW, due=False))
        with psycopg.connect(conninfo, autocommit=True) as conn:
            conn.execute("ANALYZE")
        yield conninfo, store


@contextmanager
def _captured(store: SqlStore) -> Iterator[list[tuple[str, Any]]]:
    """Every single statement touching routines or runs, as issued (text, parameters)."""
    seen: list[tuple[str, Any]] = []

    def grab(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, executemany: bool) -> None:
        if not executemany and re.search(r"\b(routines|runs)\b", statement):
            seen.append((statement, parameters))

    sa.event.listen(store.engine, "before_cursor_execute", grab)
    try:
        yield seen
    finally:
        sa.event.remove(store.engine, "before_cursor_execute", grab)


def _check(conninfo: str, seen: list[tuple[str, Any]], mode: str = "force_generic_plan") -> list[str]:
    used: list[str] = []
    assert seen, "no statement was captured"
    for statement, params in seen:
        plan = explain_plan(conninfo, statement, params, mode=mode)
        nodes = list(plan_nodes(plan))
        seq = [n for n in nodes if n["Node Type"] == "Seq Scan" and n.get("Relation Name") in TABLES]
        assert not seq, f"sequential scan of {seq[0]['Relation Name']} in\n{statement}\n{json.dumps(plan, indent=1)}"
        # an index scan of a table, or a bitmap index scan (under its table's Bitmap Heap Scan)
        indexes = [
            n["Index Name"]
            for n in nodes
            if "Index Name" in n and (n.get("Relation Name") in TABLES or n["Node Type"] == "Bitmap Index Scan")
        ]
        if not statement.startswith("INSERT"):  # an INSERT ... SELECT FROM unnest reads no table
            assert indexes, f"no index read in\n{statement}"
        used += indexes
    return used


def test_claim_due_statements_use_indexes(loaded: tuple[str, SqlStore]) -> None:
    conninfo, store = loaded
    with _captured(store) as seen:
        batch = store.claim_due(NOW, DUE, fire_next_due(window=timedelta(hours=1)), TIMERS)
    assert len(batch.claimed) == DUE
    assert len(seen) == 3  # lock, supersede (carrying the cursor moves: a CTE), insert: constant per batch
    used = _check(conninfo, seen)
    assert "ix_routines_due" in used
    # The batched cursor UPDATE (the supersede's CTE) reaches the routine rows the claim locked by
    # their ``ctid`` (a TID scan), not by 1,000 primary key probes (its plan before) nor by a scan of
    # every routine (the plan the same join got in the benchmark's floor), under either plan.
    (statement, params) = next((s, p) for s, p in seen if "a_advanced AS" in s)
    for mode in ("force_custom_plan", "force_generic_plan"):
        nodes = list(plan_nodes(explain_plan(conninfo, statement, params, mode=mode)))
        updates = [n for n in nodes if n["Node Type"] == "ModifyTable" and n.get("Relation Name") == "routines"]
        assert len(updates) == 1, mode
        reached = [n for n in list(plan_nodes(updates[0]))[1:] if n.get("Relation Name") == "routines"]
        assert [n["Node Type"] for n in reached] == ["Tid Scan"], (mode, reached)


def test_the_supersede_reaches_each_run_it_ends_by_its_probed_row(loaded: tuple[str, SqlStore]) -> None:
    """Joined to the ledger by the primary key alone, the supersede's UPDATE was planned (custom
    plan, the arrays' real sizes: 1,000 keys, half estimated to match) as a hash of a sequential
    scan of ``runs``: the whole ledger per batch. It reaches each run by the ``ctid`` its probe
    read (``ctid = ANY(ARRAY(...))``: a TID scan), whatever the ledger's size or its statistics."""
    conninfo, store = loaded
    with _captured(store) as seen:
        store.claim_due(NOW + timedelta(hours=1), DUE, fire_next_due(window=timedelta(hours=1)), TIMERS)
    (statement, params) = next((s, p) for s, p in seen if "s_ended AS" in s)
    for mode in ("force_custom_plan", "force_generic_plan"):
        nodes = list(plan_nodes(explain_plan(conninfo, statement, params, mode=mode)))
        updates = [n for n in nodes if n["Node Type"] == "ModifyTable" and n.get("Relation Name") == "runs"]
        assert len(updates) == 1, mode
        below = list(plan_nodes(updates[0]))[1:]
        reached = [n for n in below if n.get("Relation Name") == "runs" and n.get("Alias") == "runs"]
        assert [n["Node Type"] for n in reached] == ["Tid Scan"], (mode, reached)


def test_a_short_batch_checks_for_held_due_rows_through_the_due_index(loaded: tuple[str, SqlStore]) -> None:
    """After a short batch, the check for due rows another transaction held is an index probe: an
    ``EXISTS`` there was planned as a scan of the whole table from these statistics (taken while
    1,000 routines were due), for the very parameters of the check (the store plans every statement
    for its parameters)."""
    conninfo, store = loaded
    with _captured(store) as seen:
        store.claim_due(NOW, DUE + 1, fire_next_due(window=timedelta(hours=1)), TIMERS)
    held = [(s, p) for s, p in seen if "FOR UPDATE" not in s and "routines.next_due_at <=" in s]
    assert len(held) == 1, [s for s, _ in seen]
    assert "ix_routines_due" in _check(conninfo, held)
    assert "ix_routines_due" in _check(conninfo, held, mode="force_custom_plan")


def test_take_resends_statements_use_indexes(loaded: tuple[str, SqlStore]) -> None:
    conninfo, store = loaded
    with _captured(store) as seen:
        got = store.take_resends(NOW, 100, TIMERS)
    assert len(got.resend) == 100
    used = _check(conninfo, seen)
    assert {"ix_runs_expires", "ix_runs_resend"} <= set(used)


def test_take_polls_statement_uses_indexes(loaded: tuple[str, SqlStore]) -> None:
    conninfo, store = loaded
    with _captured(store) as seen:
        got = store.take_polls(NOW, 100, TIMERS)
    assert len(got) == 100
    used = _check(conninfo, seen)
    assert "ix_runs_poll" in used


def test_the_tick_probe_reads_each_step_through_its_index(loaded: tuple[str, SqlStore]) -> None:
    """The idle tick's one read: one arm per step, each through the step's partial index (generic
    plan: whatever the statistics say about ``now``)."""
    conninfo, store = loaded
    with _captured(store) as seen:
        store.probe_tick(NOW, TIMERS.run_time_limit)
    assert len(seen) == 1
    _check(conninfo, seen)  # no sequential scan of routines or runs
    used = {n["Index Name"] for n in plan_nodes(explain_plan(conninfo, *seen[0])) if "Index Name" in n}
    expected = {"ix_routines_due", "ix_runs_resend", "ix_runs_poll", "ix_runs_erase", "ix_routines_deleted",
                "ix_runs_active_since", "ix_routines_erroring"}  # fmt: skip
    assert expected <= used, used
    assert used & {"ix_runs_expires", "uq_runs_one_buffered"}, used


def test_without_the_indexes_the_same_statements_scan_the_tables(loaded: tuple[str, SqlStore]) -> None:
    """The control: the data is large enough that the plans above depend on the indexes."""
    conninfo, store = loaded
    with _captured(store) as seen:
        store.peek_due(NOW, DUE)
        store.take_polls(NOW, 100, TIMERS)
    due_select, polls = seen
    partial = (
        "ix_runs_poll",
        "ix_runs_active_since",
        "uq_runs_one_active",
        "ix_runs_resend",
        "ix_runs_expires",
    )
    for (statement, params), drop, table in (
        (due_select, ("ix_routines_due",), "routines"),
        (polls, partial, "runs"),
    ):
        nodes = list(plan_nodes(explain_plan(conninfo, statement, params, without=drop)))
        assert any(n["Node Type"] == "Seq Scan" and n.get("Relation Name") == table for n in nodes), nodes


def test_overlap_latest_statements_use_indexes(loaded: tuple[str, SqlStore]) -> None:
    """A batch of ``latest`` routines costs TWO more statements (their open runs locked, the buffered
    rows they replace), and a terminal write looks for the routine's buffered row through its
    partial index, in its own statement."""
    from alma_schedule.model import RunResult
    from alma_schedule.testing.contract_buffered import buffering

    conninfo, store = loaded
    at = NOW + timedelta(minutes=2)
    with _captured(store) as seen:
        batch = store.claim_due(at, DUE, buffering(fire_next_due(window=timedelta(hours=1))), TIMERS)
    assert batch.claimed
    assert len(seen) == 5  # lock, lock their open runs, replace buffered, supersede (+ the cursor moves), insert
    _check(conninfo, seen)
    started = store.start(batch.claimed[0].key, now=at)
    assert started.won
    with _captured(store) as seen:
        store.finish(batch.claimed[0].key, RunResult.completed(), now=at, timers=TIMERS)
    # no buffered row: the one-statement finish itself answers so (a NOT EXISTS through the partial
    # index guards its terminal write) and no statement is added
    ending = [s for s in seen if "'buffered'" in s[0]]
    assert [s[0].lstrip().split()[0] for s in ending] == ["WITH"], [s[0] for s in seen]
    assert len(seen) == 1
    assert "uq_runs_one_buffered" in _check(conninfo, ending)


def _backfill_statements(store: SqlStore) -> list[tuple[str, Any]]:
    """The statements of one ``claim_backfills`` whose plan declines every routine (writes nothing)."""
    seen: list[tuple[str, Any]] = []

    def grab(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, executemany: bool) -> None:
        if re.search(r"\bbackfills\b", statement):
            seen.append((statement, parameters))

    sa.event.listen(store.engine, "before_cursor_execute", grab)
    try:
        assert store.claim_backfills(NOW, 100, lambda routine, row: None, TIMERS) == []
    finally:
        sa.event.remove(store.engine, "before_cursor_execute", grab)
    return seen


def test_claim_backfills_reads_the_pending_index_and_with_none_pending_reads_once(
    loaded: tuple[str, SqlStore],
) -> None:
    """20,000 ranges, all done: the tick's backfill step is ONE read through ix_backfills_pending.
    50 pending: the locking read joins them to their routines by key, never scanning a table."""
    conninfo, store = loaded
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO backfills SELECT org, uid, routine_id, %s, %s, NULL, 1000, NULL, %s FROM routines",
            (NOW - timedelta(days=1), NOW - timedelta(hours=1), NOW),
        )
        conn.execute("ANALYZE backfills")
    try:
        (only,) = _backfill_statements(store)
        nodes = list(plan_nodes(explain_plan(conninfo, *only)))
        assert [n.get("Index Name") for n in nodes if n.get("Relation Name") == "backfills"] == ["ix_backfills_pending"]
        with psycopg.connect(conninfo, autocommit=True) as conn:
            conn.execute(
                "UPDATE backfills SET next_at = from_at WHERE routine_id IN (SELECT routine_id FROM routines "
                "WHERE next_due_at > %s ORDER BY routine_id LIMIT 50)",
                (NOW,),
            )
        statements = _backfill_statements(store)
        assert len(statements) == 2  # the check, then the locking read (the plan declined: no write)
        for statement, params in statements:
            nodes = list(plan_nodes(explain_plan(conninfo, statement, params)))
            tables = {*TABLES, "backfills"}
            scans = [n for n in nodes if n["Node Type"] == "Seq Scan" and n.get("Relation Name") in tables]
            assert not scans, json.dumps(nodes, indent=1)
            assert "ix_backfills_pending" in [n.get("Index Name") for n in nodes]
    finally:
        with psycopg.connect(conninfo, autocommit=True) as conn:
            conn.execute("DELETE FROM backfills")


def test_a_batch_of_a_scan_starts_past_the_last_ones_rows_and_excludes_keys_hashed(
    loaded: tuple[str, SqlStore],
) -> None:
    """One tick's batches share a ``ClaimScan``: the second batch's locking read starts the due
    index scan past the first batch's last due key (an index condition: it never walks those rows
    again), and its held-rows check (a short batch) excludes the keys it decided through a hashed
    subplan over the key arrays (a list of row values would be compared with every row scanned)."""
    conninfo, store = loaded
    at = NOW + timedelta(seconds=60 + 1_299)  # routines 1,000-1,299 come due, and the first 1,000 again
    scan, decide = ClaimScan(), fire_next_due(step=timedelta(days=3))
    first = store.claim_due(at, DUE, decide, TIMERS, scan)
    assert len(first.claimed) == DUE
    with _captured(store) as seen:
        second = store.claim_due(at, DUE, decide, TIMERS, scan)
    assert 0 < len(second.claimed) < DUE
    [locking] = [s for s in seen if "FOR UPDATE" in s[0] and "routines.next_due_at <=" in s[0]]
    [held] = [s for s in seen if "FOR UPDATE" not in s[0] and "routines.next_due_at <=" in s[0]]
    for mode in ("force_generic_plan", "force_custom_plan"):
        nodes = plan_nodes(explain_plan(conninfo, *locking, mode=mode))
        due_scans = [n for n in nodes if n.get("Index Name") == "ix_routines_due"]
        assert due_scans and "ROW(" in due_scans[0]["Index Cond"], due_scans
        assert "hashed SubPlan" in json.dumps(explain_plan(conninfo, *held, mode=mode))
    assert "ix_routines_due" in _check(conninfo, [locking, held])


def test_a_big_sweep_takes_its_rows_at_their_addresses_never_scanning_the_ledger(loaded: tuple[str, SqlStore]) -> None:
    """(Last: it expires the module's claimed runs.) A sweep that takes ``claim_limit`` rows: its
    rows, taken as a key ``IN`` its locking subquery, were planned (for these parameters, 500
    expiring rows of 21,800) as a hash of a sequential scan of ``runs``; they are reached at the
    ctids the subquery locked (a TID scan)."""
    conninfo, store = loaded
    with _captured(store) as seen:
        got = store.take_resends(NOW + timedelta(hours=3), 1000, TIMERS)
    assert got.expired
    for statement, params in seen:
        _check(conninfo, [(statement, params)], mode="force_custom_plan")
        plan = explain_plan(conninfo, statement, params, mode="force_custom_plan")
        reached = [n["Node Type"] for n in plan_nodes(plan) if n.get("Parent Relationship") != "InitPlan"]
        assert "Tid Scan" in reached, statement
