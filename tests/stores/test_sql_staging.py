"""PostgreSQL: ``claim_due`` calls ``staging`` once, with the records it then returns as claimed, while
the database runs the batch's INSERT (sent ahead: the backend's statement at that moment is the INSERT,
as another connection sees it)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import psycopg
import pytest

from alma_schedule.model import RunRecord
from alma_schedule.stores.sql import SqlStore
from alma_schedule.testing.builders import MINUTE, T0, TIMERS, fire_due, register, run_in
from tests.stores.sql_support import libpq_url, opened, pg_database

pytestmark = pytest.mark.postgres


@pytest.fixture
def store() -> Iterator[SqlStore]:
    with pg_database() as url, opened(url) as store:
        yield store


def _statements_in_transaction(url: str) -> list[str]:
    """The current (or last) statement of each backend of the store's database inside a transaction."""
    name = url.rsplit("/", 1)[1]
    with psycopg.connect(libpq_url(url)) as conn:
        rows = conn.execute(
            "SELECT query FROM pg_stat_activity WHERE datname = %s AND xact_start IS NOT NULL"
            " AND pid <> pg_backend_pid()",
            (name,),
        ).fetchall()
    return [str(r[0]) for r in rows]


def test_staging_is_called_once_while_the_insert_runs_with_what_is_then_claimed(store: SqlStore) -> None:
    run_in(store, "running", "r2")  # blocks r2's next fire: skipped(overlap), not staged
    for rid in ("r1", "r3", "r4"):
        register(store, rid, next_due_at=T0 + MINUTE)
    calls: list[list[RunRecord]] = []
    seen: list[list[str]] = []

    def staging(runs: Sequence[RunRecord]) -> None:
        calls.append(list(runs))
        seen.append(_statements_in_transaction(store.url))

    batch = store.claim_due(T0 + MINUTE, 10, fire_due, TIMERS, staging=staging)
    assert sorted(r.routine_id for r in batch.claimed) == ["r1", "r3", "r4"]
    assert len(calls) == 1
    assert all(a is b for a, b in zip(calls[0], batch.claimed, strict=True)) and len(calls[0]) == 3
    [statements] = seen
    assert len(statements) == 1 and statements[0].lstrip().startswith("INSERT INTO"), statements  # sent ahead


def test_staging_is_not_called_for_a_batch_of_missed_fires_only(store: SqlStore) -> None:
    from alma_schedule.testing.builders import fire_next_due

    register(store, "r1", next_due_at=T0)
    calls: list[Sequence[RunRecord]] = []
    batch = store.claim_due(T0, 10, fire_next_due(missed=True), TIMERS, staging=calls.append)
    assert (batch.claimed, calls, len(batch.skipped)) == ((), [], 1)
