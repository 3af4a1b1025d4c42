"""PostgreSQL: the run side's store calls cost what docs/architecture.md says, counted by libpq.

A won ``start(in_window=True)`` is ONE round trip (the CAS returns the routine: no read before or
after it, no BEGIN/COMMIT); a ``finish`` with no buffered fire to release is ONE round trip (one
data-modifying statement) whatever it moves: the streak (+1, the latch, a reset) and a held
reservation (spend rows settled). Round trips are libpq's trace (``PQtrace``): each frontend
``Query`` or ``Sync`` is one, counted once each statement has run on the connection (its first
execution there also sends its Parse: once per connection). Nothing here is timed.
"""

from __future__ import annotations

import functools
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa

from alma_schedule.model import Ceiling, RunResult
from alma_schedule.stores.sql import SqlStore
from alma_schedule.testing.builders import DAY, SCOPE, SECOND, T0, TIMERS, claim, register, with_threshold
from tests.stores.sql_support import opened, pg_database

pytestmark = pytest.mark.postgres
FAILED = RunResult.failed("runner_error")


class Trips:
    """libpq's trace of every connection the store checks out while ``on``."""

    def __init__(self, engine: sa.Engine) -> None:
        self.on = False
        self.file = tempfile.TemporaryFile(mode="w+")

        @sa.event.listens_for(engine, "checkout")
        def _checkout(dbapi: Any, _record: Any, _proxy: Any) -> None:
            if self.on:
                dbapi.pgconn.trace(self.file.fileno())
                dbapi.pgconn.set_trace_flags(1)

        @sa.event.listens_for(engine, "checkin")
        def _checkin(dbapi: Any, _record: Any) -> None:
            if dbapi is not None and not dbapi.closed:
                dbapi.pgconn.untrace()

    def count(self, call: Any) -> tuple[Any, int]:
        self.file.seek(0)
        self.file.truncate()
        self.on = True
        try:
            out = call()
        finally:
            self.on = False
        self.file.flush()
        self.file.seek(0)
        text = self.file.read()
        frontend = (line.split("\t") for line in text.splitlines() if line.startswith("F\t"))
        n = sum(1 for parts in frontend if len(parts) > 2 and parts[2] in ("Query", "Sync"))
        return out, n


@pytest.fixture(scope="module")
def pg() -> Iterator[SqlStore]:
    """One connection, on which each shape of the start and the finish has run once: their first
    execution on a connection also sends their Parse (:mod:`alma_schedule.stores.postgres.hot`)."""
    with pg_database() as url, opened(url, pool_size=1, max_overflow=0) as store:
        for i, result in enumerate((RunResult.completed(), RunResult.completed("sent"), FAILED)):
            register(store, f"warm-{i}")
            key = claim(store, f"warm-{i}").key
            assert store.start(key, now=T0 + SECOND, owner="req-0", in_window=True).won
            assert store.finish(key, result, now=T0 + 2 * SECOND, timers=with_threshold(2)).won
        yield store


def _running(store: SqlStore, trips: Trips, rid: str) -> Any:
    register(store, rid)
    rec = claim(store, rid)
    res, n = trips.count(lambda: store.start(rec.key, now=T0 + SECOND, owner="req-1", in_window=True))
    assert res.won and res.routine is not None and res.routine.routine_id == rid
    assert n == 1
    return rec.key


def test_start_and_finish_are_one_round_trip_each(pg: SqlStore) -> None:
    trips = Trips(pg.engine)
    key = _running(pg, trips, "ok-1")
    res, n = trips.count(lambda: pg.finish(key, RunResult.completed(), now=T0 + 2 * SECOND, timers=TIMERS))
    assert res.won and res.record.state == "completed" and n == 1
    sent = _running(pg, trips, "sent-1")
    res, n = trips.count(lambda: pg.finish(sent, RunResult.completed("sent"), now=T0 + 2 * SECOND, timers=TIMERS))
    assert res.won and n == 1


def test_the_one_statement_finish_moves_the_streak_and_latches(pg: SqlStore) -> None:
    trips = Trips(pg.engine)
    timers = with_threshold(2)
    for i, expected in enumerate((1, 2)):
        key = _running(pg, trips, "fail-1") if i == 0 else _again(pg, trips, "fail-1")
        res, n = trips.count(functools.partial(pg.finish, key, FAILED, now=T0 + SECOND, timers=timers))
        # one round trip; the failure that latches the pause (once a streak) takes the transaction,
        # which appends the pause's audit event (issue 50)
        assert res.won and (n == 1 if expected < 2 else n > 1)
        routine = pg.get_routine(SCOPE, "fail-1")
        assert routine is not None and routine.consecutive_failures == expected
    assert routine.paused_reason == "failure_streak:runner_error" and routine.next_due_at is None
    assert next((e.action, e.actor) for e in pg.routine_events(SCOPE, "fail-1")) == ("pause", "streak")


def _again(store: SqlStore, trips: Trips, rid: str) -> Any:
    """A manual fire of ``rid``, started."""
    from alma_schedule.model import RunKey

    key = RunKey.of(SCOPE, rid, "manual:again")
    assert store.claim_manual(key, now=T0 + SECOND, expires_at=T0 + 3600 * SECOND, resend_at=T0 + 60 * SECOND).won
    assert store.start(key, now=T0 + SECOND, in_window=True).won
    return key


def test_the_one_statement_finish_settles_a_held_reservation(pg: SqlStore) -> None:
    trips = Trips(pg.engine)
    key = _running(pg, trips, "money-1")
    ceilings = [
        Ceiling(Ceiling.org_key(SCOPE.org), 10_000),
        Ceiling(Ceiling.routine_key(SCOPE.org, SCOPE.uid, "money-1"), 10_000),
    ]
    assert pg.reserve(key, DAY, 300, ceilings).ok
    res, n = trips.count(lambda: pg.finish(key, RunResult.completed("ok", 120), now=T0 + SECOND, timers=TIMERS))
    assert res.won and n == 1
    assert (res.record.reserved_micros, res.record.reserve_ceilings, res.record.cost_micros) == (0, (), 120)
    assert [pg.spend(c.key, DAY) for c in ceilings] == [120, 120]
