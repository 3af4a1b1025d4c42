"""Overlap ``latest`` under a race: the finish of the active run that waits on the routine row a
claim holds while it buffers the next fire must release that fire (PostgreSQL, two threads).

The claim locks the routine, finds the active run and inserts the ``buffered`` row; the finish of
that active run (a completed run: it steps the failure streak, so it locks the routine row too)
waits for the claim's lock. Once the claim commits, the finish must see the buffered row and
release it (``claimed``); a finish that read the routine's buffered rows before it waited would
end the active run and leave the buffered fire waiting for a release that never comes.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from alma_schedule.model import ClaimBatch, ClaimResult, Routine, RunResult
from alma_schedule.testing.builders import MINUTE, T0, TIMERS, register, running
from alma_schedule.testing.contract_buffered import LATEST
from tests.stores.sql_support import opened, pg_database

pytestmark = pytest.mark.postgres

LATEST_SCHEDULE = {"every": 60, "overlap": "latest"}


def _waiting_on_a_lock(store: Any) -> int:
    with store.engine.connect() as conn:
        n = conn.exec_driver_sql(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()"
        ).scalar()
        conn.rollback()
        return int(n or 0)


def test_a_finish_that_waited_for_the_buffering_claim_releases_the_buffered_fire() -> None:
    with pg_database() as url, opened(url) as store:
        register(store, schedule=LATEST_SCHEDULE)
        active = running(store, decide=LATEST)
        in_decide, go = threading.Event(), threading.Event()
        claims: list[ClaimBatch] = []
        finishes: list[ClaimResult] = []

        def decide(routine: Routine) -> Any:
            in_decide.set()  # the claim holds the routine row from here to its commit
            assert go.wait(30)
            return LATEST(routine)

        at = T0 + MINUTE
        claim = threading.Thread(target=lambda: claims.append(store.claim_due(at, 100, decide, TIMERS)))
        finish = threading.Thread(
            target=lambda: finishes.append(store.finish(active.key, RunResult.completed(), now=at, timers=TIMERS))
        )
        claim.start()
        assert in_decide.wait(30)
        finish.start()
        deadline = time.monotonic() + 30
        while _waiting_on_a_lock(store) == 0:  # the finish waits on the claim's routine row lock
            assert time.monotonic() < deadline, "the finish never waited on the routine row"
            time.sleep(0.05)
        go.set()
        claim.join(30)
        finish.join(30)
        [batch] = claims
        [done] = finishes
        [buffered] = batch.buffered  # the claim saw the active run: the fire waits
        assert done.won and done.record is not None and done.record.state == "completed"
        after = store.get(buffered.key)
        assert after is not None and after.state == "claimed", after  # released, not stranded
        assert done.released is not None and done.released.key == buffered.key
