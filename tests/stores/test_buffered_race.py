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
from alma_schedule.testing.builders import MINUTE, T0, TIMERS, key_of, register, running
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


def test_a_manual_run_expiring_while_a_claim_buffers_behind_it_never_strands_the_fire() -> None:
    """The claim inserts the ``buffered`` fire behind a pending manual run; before it commits, the
    tick's expiry sweep closes that manual run (past its ``expires_at``). The fire is released once
    the claim has committed: at once by a later sweep, never left waiting behind a terminal run.
    A trigger (test scaffolding) holds the claim right after its buffered insert, on an advisory
    lock this test holds."""
    with pg_database() as url, opened(url) as store:
        with store.engine.begin() as conn:
            conn.exec_driver_sql(
                "CREATE FUNCTION alma.hold_claim() RETURNS trigger LANGUAGE plpgsql AS"
                " $$ BEGIN PERFORM pg_advisory_xact_lock(4242); RETURN NEW; END $$"
            )
            conn.exec_driver_sql(
                "CREATE TRIGGER hold_claim AFTER INSERT ON alma.runs FOR EACH ROW"
                " WHEN (NEW.state = 'buffered') EXECUTE FUNCTION alma.hold_claim()"
            )
        register(store, schedule=LATEST_SCHEDULE, next_due_at=T0 + MINUTE)
        manual = store.claim_manual(
            key_of("r1", "manual:01"), now=T0, expires_at=T0 + 2 * MINUTE, resend_at=T0 + 5 * MINUTE
        )
        assert manual.won
        claims: list[ClaimBatch] = []
        with store.engine.connect() as holder:
            holder.exec_driver_sql("SELECT pg_advisory_lock(4242)")
            claim = threading.Thread(target=lambda: claims.append(store.claim_due(T0 + MINUTE, 100, LATEST, TIMERS)))
            claim.start()
            deadline = time.monotonic() + 30
            while _waiting_on_a_lock(store) == 0:  # the claim waits in the trigger, its fire buffered
                assert time.monotonic() < deadline, "the claim never reached its buffered insert"
                time.sleep(0.05)
            swept = store.take_resends(T0 + 3 * MINUTE, 100, TIMERS)  # past the manual run's window
            holder.exec_driver_sql("SELECT pg_advisory_unlock(4242)")
            holder.commit()
            claim.join(30)
        [batch] = claims
        [buffered] = batch.buffered
        again = store.take_resends(T0 + 3 * MINUTE, 100, TIMERS)
        after = store.get(buffered.key)
        gone = store.get(key_of("r1", "manual:01"))
        assert gone is not None and gone.state == "skipped", (swept, again)
        assert after is not None and after.state in ("claimed", "skipped"), after  # never left buffered
        assert after.state == "claimed" or after.reason == "missed", after
