"""PostgreSQL and SQLite: the fires a claim collapsed (issue 44) are counted by the statement that
already advances the cursors: a batch where some fire collapsed others sends exactly as many
statements as a steady batch (on PostgreSQL the cursor moves still ride in the supersede's
statement), and a steady batch sends the very statement it sent before the count existed (no
``fires_missed`` in it). The counts themselves are the store contract's
(``alma_schedule.testing.contract_missed``, every backend)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from alma_schedule.engine.decide import decide
from alma_schedule.settings import Settings
from alma_schedule.stores.sql import SqlStore, migrate_store
from alma_schedule.testing.builders import MINUTE, SCOPE, T0, TIMERS, register
from tests.stores.sql_support import fast_dir, opened, pg_database


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def store(request: pytest.FixtureRequest) -> Iterator[SqlStore]:
    if request.param == "sqlite":
        with fast_dir() as path:
            url = f"sqlite:///{Path(path)}/store.sqlite3"
            migrate_store(url)
            with opened(url) as store:
                yield store
    else:
        with pg_database() as url, opened(url) as store:
            yield store


def _claim(store: SqlStore, now: Any) -> tuple[list[str], Any]:
    seen: list[str] = []

    def grab(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, executemany: bool) -> None:
        seen.append(statement)

    sa.event.listen(store.engine, "before_cursor_execute", grab)
    try:
        batch = store.claim_due(now, 100, lambda r: decide(r, now, Settings()), TIMERS)
    finally:
        sa.event.remove(store.engine, "before_cursor_execute", grab)
    return [s for s in seen if not s.lstrip().upper().startswith(("BEGIN", "COMMIT", "SET"))], batch


def _counting(statements: list[str]) -> list[str]:
    """The statements that add to a count (``fires_missed = fires_missed + ...``), not the reads of it."""
    return [s for s in statements if re.search(r"fires_missed\s*=\s*\(?\S*fires_missed \+", s)]


def _shape(statements: list[str]) -> list[str]:
    """Each statement's verb and the tables it writes (what a round trip does, not its values)."""
    return [" ".join(re.findall(r"\b(?:INSERT INTO|UPDATE|SELECT|DELETE FROM) \S+", s)[:1]) for s in statements]


def test_the_count_rides_in_the_cursor_move_and_a_steady_batch_is_unchanged(store: SqlStore) -> None:
    for rid in ("a", "b"):
        register(store, rid, schedule={"every": 60}, last_fire=T0 - MINUTE, next_due_at=T0)
    steady, batch = _claim(store, T0)
    assert len(batch.claimed) == 2 and batch.fires_missed == ()
    assert _counting(steady) == [], "a steady batch's cursor move is the statement it always was"
    later = T0 + 10 * MINUTE  # down for 10 minutes: 9 fires of each collapse
    counting, batch = _claim(store, later)
    assert len(batch.claimed) == 2 and batch.fires_missed == (("test", 18),)
    assert _shape(counting) == _shape(steady), "no statement, no round trip of its own"
    writes = _counting(counting)
    assert len(writes) == 1 and re.search(r"UPDATE \S*routines SET .*last_fire", writes[0], re.S), writes
    rows = [store.get_routine(SCOPE, rid) for rid in ("a", "b")]
    assert [(r.fires_missed, r.last_fire) for r in rows if r is not None] == [(9, later), (9, later)]


def test_a_batch_of_only_missed_fires_counts_in_its_own_cursor_move(store: SqlStore) -> None:
    # catch_up 30 s: the claimed fire is recorded skipped(missed) (PostgreSQL: no live fire, so the cursor
    # moves are their own statement, not the supersede's CTE), and its 9 predecessors are counted
    register(store, "r1", schedule={"every": 60, "catch_up": "30s"}, last_fire=T0 - 10 * MINUTE, next_due_at=T0)
    now = T0 + MINUTE / 2 + MINUTE / 6
    statements, batch = _claim(store, now)
    assert (
        batch.claimed == () and [r.reason for r in batch.skipped] == ["missed"] and batch.fires_missed == (("test", 9),)
    )
    assert len(_counting(statements)) == 1
    row = store.get_routine(SCOPE, "r1")
    assert row is not None and row.fires_missed == 9
