"""A due routine whose row another transaction holds while a tick's batch locks (its previous run
finishing, a registration, another tick) is claimed by that tick once released (PostgreSQL's
``FOR UPDATE SKIP LOCKED`` skipped it): a fire whose only tick in its window met the row held was
lost (found by the chaos suite). The holder here is a real second connection to the same database.

* held for a moment, then released unchanged: the tick waits for it and claims the fire, once;
* held by "another tick" that claims it (advances the cursor) before releasing: the waiting tick
  finds it no longer due and claims nothing: no fire twice;
* held past the wait: the tick returns without it and without raising; the next tick claims it;
* held by the same tick's other open batch (one ``ClaimScan``): left to that batch, never waited for.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator

import psycopg
import pytest

from alma_schedule.model import ClaimScan, Decision, Routine
from alma_schedule.stores.sql import SqlStore
from alma_schedule.testing.builders import SCOPE, T0, TIMERS, fire_due, register
from tests.stores.sql_support import opened, pg_database

pytestmark = pytest.mark.postgres

LOCK = "SELECT 1 FROM alma.routines WHERE org = %s AND uid = %s AND routine_id = 'r1' FOR UPDATE"


@pytest.fixture
def world() -> Iterator[tuple[SqlStore, str]]:
    with pg_database() as url, opened(url) as store:
        register(store, "r1", next_due_at=T0)
        register(store, "r2", next_due_at=T0)
        yield store, url.replace("postgresql+psycopg://", "postgresql://", 1)


def _hold(libpq: str, seconds: float, then: str | None = None) -> tuple[threading.Thread, threading.Event]:
    """Lock r1's row in another connection, keep it ``seconds``, run ``then``, commit."""
    locked = threading.Event()

    def hold() -> None:
        with psycopg.connect(libpq) as conn:
            conn.execute(LOCK, (SCOPE.org, SCOPE.uid))
            locked.set()
            time.sleep(seconds)
            if then is not None:
                conn.execute(then, (SCOPE.org, SCOPE.uid))
            conn.commit()

    thread = threading.Thread(target=hold, daemon=True)
    thread.start()
    assert locked.wait(10)
    return thread, locked


def _claimed_ids(batch: object) -> list[str]:
    return sorted(r.routine_id for r in batch.claimed)  # type: ignore[attr-defined]


def test_a_row_held_for_a_moment_is_waited_for_and_claimed(world: tuple[SqlStore, str]) -> None:
    store, libpq = world
    thread, _ = _hold(libpq, 0.5)
    batch = store.claim_due(T0, 10, fire_due, TIMERS)
    thread.join()
    assert _claimed_ids(batch) == ["r1", "r2"]
    assert store.claim_due(T0, 10, fire_due, TIMERS).claimed == ()  # nothing twice


def test_a_row_another_tick_claims_while_holding_it_is_not_claimed_again(world: tuple[SqlStore, str]) -> None:
    store, libpq = world
    advance = (
        "UPDATE alma.routines SET next_due_at = next_due_at + interval '1 hour', last_fire = next_due_at "
        "WHERE org = %s AND uid = %s AND routine_id = 'r1'"
    )
    thread, _ = _hold(libpq, 0.5, then=advance)
    batch = store.claim_due(T0, 10, fire_due, TIMERS)
    thread.join()
    assert _claimed_ids(batch) == ["r2"]  # r1 re-checked after the wait: no longer due


def test_a_row_rewritten_while_held_has_its_cursor_moved_at_its_new_address(world: tuple[SqlStore, str]) -> None:
    """The holder rewrites r1 (a new row version: a new ctid) without changing what is due; the
    waiting claim locks that version, and the cursor moves reach it there (a TID scan at the
    address its lock read): r1 is claimed and its cursor stands at the fire."""
    store, libpq = world
    touch = "UPDATE alma.routines SET updated_at = updated_at WHERE org = %s AND uid = %s AND routine_id = 'r1'"
    with psycopg.connect(libpq) as conn:
        before = conn.execute("SELECT ctid::text FROM alma.routines WHERE routine_id = 'r1'").fetchone()
    thread, _ = _hold(libpq, 0.5, then=touch)
    batch = store.claim_due(T0, 10, fire_due, TIMERS)
    thread.join()
    assert _claimed_ids(batch) == ["r1", "r2"]
    with psycopg.connect(libpq) as conn:
        after = conn.execute("SELECT ctid::text FROM alma.routines WHERE routine_id = 'r1'").fetchone()
    assert after != before
    for rec in batch.claimed:
        routine = store.get_routine(SCOPE, rec.routine_id)
        assert routine is not None and routine.last_fire == rec.fire_at, rec.routine_id
        assert routine.next_due_at is None or routine.next_due_at > T0


def test_a_row_held_past_the_wait_is_left_to_the_next_tick(world: tuple[SqlStore, str]) -> None:
    store, libpq = world
    thread, _ = _hold(libpq, 3.5)  # HELD_LOCK_WAIT is 2 s
    batch = store.claim_due(T0, 10, fire_due, TIMERS)
    assert _claimed_ids(batch) == ["r2"]
    thread.join()
    assert _claimed_ids(store.claim_due(T0, 10, fire_due, TIMERS)) == ["r1"]


def test_a_short_batch_leaves_the_rows_its_ticks_other_open_batch_holds_to_it(
    world: tuple[SqlStore, str], caplog: pytest.LogCaptureFixture
) -> None:
    """Two batches of one tick (one ``ClaimScan``) open at once: the first holds r1 (it waits in
    ``decide`` until the second has returned); the second, short, does not take r1 for a row another
    transaction holds: no claim of held rows, no wait for r1 (it would time out: the first batch
    waits for it), and each fire is claimed once, by its own batch."""
    store, _ = world
    register(store, "r3", next_due_at=T0)
    scan, locked, second_done, out = ClaimScan(), threading.Event(), threading.Event(), {}

    def holding(routine: Routine) -> Decision:
        locked.set()
        assert second_done.wait(20)
        return fire_due(routine)

    first = threading.Thread(target=lambda: out.update(first=store.claim_due(T0, 1, holding, TIMERS, scan)))
    first.start()
    assert locked.wait(10)
    with caplog.at_level(logging.WARNING, logger="alma_schedule.stores"):
        second = store.claim_due(T0, 10, fire_due, TIMERS, scan)
    second_done.set()
    first.join(20)
    assert _claimed_ids(out["first"]) == ["r1"] and _claimed_ids(second) == ["r2", "r3"]
    assert not [r for r in caplog.records if "held by another transaction" in r.getMessage()]
    assert store.claim_due(T0, 10, fire_due, TIMERS).claimed == ()


def _statements(store: SqlStore) -> tuple[list[str], Callable[[], None]]:
    import sqlalchemy as sa

    seen: list[str] = []

    def grab(conn: object, cursor: object, statement: str, *_: object) -> None:
        seen.append(statement)

    sa.event.listen(store.engine, "before_cursor_execute", grab)
    return seen, lambda: sa.event.remove(store.engine, "before_cursor_execute", grab)


def _checks(seen: list[str]) -> list[str]:
    """The held rows' checks of the first transaction (before the held claim's lock_timeout)."""
    first = seen[: next((i for i, s in enumerate(seen) if "lock_timeout" in s), len(seen))]
    return [s for s in first if "FOR UPDATE" not in s and "routines.next_due_at <=" in s]


def test_the_check_rides_in_the_insert_when_it_returns_a_row(world: tuple[SqlStore, str]) -> None:
    """The short batch's check for held rows is a last RETURNING column of its INSERT: no statement
    of its own, and it still finds the held row."""
    store, libpq = world
    seen, stop = _statements(store)
    try:
        thread, _ = _hold(libpq, 0.5)
        batch = store.claim_due(T0, 10, fire_due, TIMERS)  # r2 inserted, r1 held
        thread.join()
    finally:
        stop()
    assert _claimed_ids(batch) == ["r1", "r2"]
    checks = _checks(seen)
    assert len(checks) == 1 and checks[0].startswith("INSERT INTO alma.runs"), seen


def test_a_batch_with_nothing_to_insert_asks_the_check_with_its_own_statement() -> None:
    with pg_database() as url, opened(url) as store:
        register(store, "r1", next_due_at=T0)  # the only due row, held
        libpq = url.replace("postgresql+psycopg://", "postgresql://", 1)
        seen, stop = _statements(store)
        try:
            thread, _ = _hold(libpq, 0.5)
            batch = store.claim_due(T0, 10, fire_due, TIMERS)
            thread.join()
        finally:
            stop()
        assert _claimed_ids(batch) == ["r1"]
        checks = _checks(seen)
        assert len(checks) == 1 and checks[0].startswith("SELECT"), seen
