"""The chaos suite's counts can fail: each one, fed a crafted observation holding the fault it
looks for, counts it, and counts 0 on the clean observation (no servers: this runs in the default
test command)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from chaos_count import LedgerRow, Observed, count
from chaos_effects import Effect

from alma_schedule.core import fire_id
from alma_schedule.model import Routine, RunKey, governed_key
from alma_schedule.runners.adapters.openai import TokenPrices
from alma_schedule.runners.task import task_id_for

T0 = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)
BASE = T0.timestamp()
SLOW = Routine("fleet", "chaos", "slow-00", "slow", {"every": "10s"}, {"seconds": 2}, T0, "rev")
TASK = Routine("fleet", "chaos", "untracked-000", "task", {"every": "10s"}, {"task": "chaos.untracked"}, T0, "rev")
TURN = Routine("acme-a", "chaos", "turn-00", "turn", {"every": "10s"}, {"goal": "g"}, T0, "rev")


def at(seconds: float) -> str:
    return (T0 + timedelta(seconds=seconds)).isoformat()


def key(routine: Routine, k: int) -> RunKey:
    return RunKey(routine.org, routine.uid, routine.routine_id, fire_id(T0 + timedelta(seconds=10 * k)))


def gkey(routine: Routine, k: int) -> str:
    rk = key(routine, k)
    return governed_key(rk.scope, rk.routine_id, rk.run_id)


def clean() -> Observed:
    """Two fires of each routine (at +10 s and +20 s), each run once, ticks at +11 s and +21 s."""
    ledger = [
        LedgerRow(key(r, k), r.kind, "completed", "ok", T0 + timedelta(seconds=10 * k + 3))
        for r in (SLOW, TASK, TURN)
        for k in (1, 2)
    ]
    effects = [Effect("slow", "slow-00", str(key(SLOW, k)), 7, BASE + 10 * k + 1, BASE + 10 * k + 3) for k in (1, 2)]
    effects += [
        Effect("untracked", "untracked-000", task_id_for(key(TASK, k)), 8, BASE + 10 * k + 1, BASE + 10 * k + 1)
        for k in (1, 2)
    ]
    usage = {"prompt_tokens": 10, "completion_tokens": 10}
    return Observed(
        routines=[SLOW, TASK, TURN],
        ledger=ledger,
        effects=effects,
        sends=[task_id_for(key(TASK, k)) for k in (1, 2)],
        ticks=[(at(s), BASE + s + 0.5) for s in (11, 21)],
        model_calls=[(BASE + 10 * k + 1, "chat", gkey(TURN, k), usage) for k in (1, 2)],
        billed_lines=[],
        deliveries=[(BASE + 10 * k + 2, gkey(TURN, k)) for k in (1, 2)],
        stuck=set(),
        stuck_by_age=set(),
        takers={},
        deaths={},
        paused_at=BASE + 30,
        prices=TokenPrices(1_000_000, 1_000_000),
        ceiling_org_micros=100,
        cap_per_run_micros=50,
    )


def test_the_clean_observation_counts_zero() -> None:
    f = count(clean())
    assert f.failing() == {}, f
    assert f.info["slots a tick ran in"] == 6 and f.info["billed by org (µ$)"] == {"acme-a": 40}


def test_a_fire_run_twice_is_counted() -> None:
    o = clean()
    o.effects.append(replace(o.effects[0], pid=9))  # the first slow fire ran again
    o.sends.append(o.sends[0])  # the first task fire's message was sent twice
    o.model_calls.append((BASE + 12, "chat", gkey(TURN, 1), None))  # and the first turn called again
    assert count(o).fires_run_twice == 3


def test_a_task_message_the_broker_delivered_twice_is_counted_apart() -> None:
    o = clean()
    o.effects.append(replace(o.effects[2], pid=9))  # one send, two executions
    f = count(o)
    assert f.fires_run_twice == 0 and f.info["task executions beyond their sends (broker redeliveries)"] == 1


def test_a_slot_a_tick_ran_in_without_a_row_is_counted_but_not_one_a_later_tick_superseded() -> None:
    o = clean()
    o.ledger = [row for row in o.ledger if row.key != key(SLOW, 1)]
    assert count(o).slots_without_row == 1
    # the only tick of the first window completed AFTER a tick of a later window: superseded, not owed
    o.ticks = [(at(21), BASE + 21.5), (at(11), BASE + 22)]
    assert count(o).slots_without_row == 0


def test_overlapping_runs_of_one_routine_are_counted_a_killed_one_ends_at_its_death() -> None:
    o = clean()
    o.effects[1] = replace(o.effects[1], started=BASE + 12)  # starts while the first still runs (until +13)
    o.deliveries[0] = (BASE + 25, gkey(TURN, 1))  # the first turn delivered after the second called
    assert count(o).parallel_runs == 2
    o = clean()
    o.effects[0] = replace(o.effects[0], ended=None)  # never ended ...
    assert count(o).parallel_runs == 1
    o.deaths = {7: (BASE + 12, "child")}  # ... because the chaos killed its process at +12
    assert count(o).parallel_runs == 0


def test_a_delivery_attempted_twice_is_counted() -> None:
    o = clean()
    o.deliveries.append((BASE + 15, gkey(TURN, 1)))
    assert count(o).deliveries_twice == 1


def test_money_billed_past_a_ceiling_or_a_cap_is_counted() -> None:
    o = clean()
    o.ceiling_org_micros = 30  # 40 µ$ billed
    assert count(o).money_past_ceiling_micros == 10
    o = clean()
    o.billed_lines.append((gkey(TURN, 1), {"prompt_tokens": 40, "completion_tokens": 10}))  # that fire: 70 µ$
    o.ceiling_org_micros = 80  # the org: 90 µ$
    assert count(o).money_past_ceiling_micros == 20 + 10  # 20 past the per-run cap, 10 past the ceiling


def test_a_run_left_running_is_counted_unless_runs_stuck_lists_it() -> None:
    o = clean()
    o.ledger[0] = replace(o.ledger[0], state="running", reason=None)
    assert count(o).running_not_stuck == 1
    o.stuck = {o.ledger[0].key}
    assert count(o).running_not_stuck == 0


def test_a_run_whose_worker_parent_died_need_only_be_listed_by_age() -> None:
    o = clean()
    o.ledger[0] = replace(o.ledger[0], state="running", reason=None)
    o.takers = {str(o.ledger[0].key): 7}
    o.deaths = {7: (BASE + 12, "child")}
    assert count(o).running_not_stuck == 1  # a pool child's death is reported: `runs stuck` must list it at once
    o.deaths = {7: (BASE + 12, "parent")}
    assert count(o).running_not_stuck == 1  # a parent's is not: listed once old enough ...
    o.stuck_by_age = {o.ledger[0].key}
    assert count(o).running_not_stuck == 0  # ... which it is


def test_a_run_is_traced_to_the_request_that_owns_it_not_to_a_resend_that_began_later() -> None:
    o = clean()
    o.ledger[0] = replace(o.ledger[0], state="running", reason=None, owner="req-a")
    o.requests = {"req-a": 7, "req-b": 8}  # req-a won the start CAS in 7; a re-send req-b began later in 8
    o.takers = {str(o.ledger[0].key): 8}
    o.deaths = {7: (BASE + 12, "parent")}
    o.stuck_by_age = {o.ledger[0].key}
    assert count(o).running_not_stuck == 0  # its owner's parent died: listed by age is what is promised
    o.ledger[0] = replace(o.ledger[0], owner="req-a/acme/u/r/run")  # a packed run_many fire's owner
    assert count(o).running_not_stuck == 0
    o.ledger[0] = replace(o.ledger[0], owner=None)  # no owner recorded: the last taker (8, alive) counts
    assert count(o).running_not_stuck == 1


def test_a_worker_that_died_unkilled_and_a_raw_item_not_dead_lettered_are_counted() -> None:
    o = clean()
    o.worker_deaths = ["run-a pid 7 exited 1: ['Unrecoverable error: JSONDecodeError(...)']"]
    o.bytes_lost = ["alma.run: b'garbage-not-an-envelope-1'", "celery: b'{\"body\": 1}'"]
    f = count(o)
    assert f.failing() == {"workers_died": 1, "bytes_not_dead_lettered": 2}
    assert f.examples["workers_died"] == o.worker_deaths
