"""Previews and the plan agree with what the ticks then do, over a simulated week, with every schedule
policy of issue 15's window part (bounds, ``max_runs``, ``catch_up``) and a three-hour outage."""

from __future__ import annotations

from datetime import timedelta

from engine_support import DAY, HOUR, MINUTE, SCOPE, T0, every_store, spec

from alma_schedule.core import parse_schedule, policy_of, preview_fires
from alma_schedule.engine.decide import claims_left
from alma_schedule.policies.finished import routine_state

WEEK = 7 * DAY
WEDNESDAY = T0 + 2 * DAY  # 08:00 UTC
#: hourly ticks, but none at 11:00, 12:00 and 13:00 on Wednesday: the first one after the outage is 13:10
OUTAGE = {WEDNESDAY + h * HOUR for h in (3, 4, 5)}
TICKS = sorted({T0 + h * HOUR for h in range(1, 7 * 24 + 1)} - OUTAGE | {WEDNESDAY + 5 * HOUR + 10 * MINUTE})

SCHEDULES = {
    "bounded": {
        "cron": "0 */6 * * *",
        "tz": "Europe/Lisbon",
        "not_before": (T0 + DAY + 3 * HOUR).isoformat(),
        "not_after": (T0 + 5 * DAY).isoformat(),
    },
    "limited": {"every": "5h", "max_runs": 7},
    "window": {"cron": "40 * * * *", "catch_up": "25m"},  # each fire is seen 20 minutes late
    "plain": {"every": "3h"},
}


def _previews(sched):
    out = {}
    for rid in SCHEDULES:
        r = sched.get(SCOPE, rid)
        policy = policy_of(r.schedule)
        left = claims_left(r, policy)
        n = 1000 if left is None else left
        fires = preview_fires(parse_schedule(r.schedule), r.registered_at, T0, n, policy=policy)
        out[rid] = [p.utc for p in fires if p.utc <= TICKS[-1]]
    return out


@every_store
def test_previews_and_plan_agree_with_a_week_of_ticks(make, clock) -> None:
    sched = make()  # in-process dispatcher: every claimed fire runs and completes
    receipts = {rid: sched.register(spec(rid, schedule)) for rid, schedule in SCHEDULES.items()}
    previews = _previews(sched)
    for rid, receipt in receipts.items():
        assert list(receipt.next_fires) == previews[rid][:3], rid
    claimed: dict[str, list] = {rid: [] for rid in SCHEDULES}
    missed: dict[str, list] = {rid: [] for rid in SCHEDULES}
    for at in TICKS:
        clock.set(at)
        plan = sched.plan()
        predicted = {(p.routine_id, p.run_id, p.action) for p in plan.due}
        report = sched.tick()
        done = {(k.routine_id, k.run_id, "claim") for k in report.claimed}
        done |= {(k.routine_id, k.run_id, "skip:missed") for k in report.skipped}
        assert done == predicted, f"the plan at {at} said {predicted}, the tick did {done}"
        for k in report.claimed:
            claimed[k.routine_id].append(sched.run(SCOPE, k.routine_id, k.run_id).fire_at)
        for k in report.skipped:
            missed[k.routine_id].append(sched.run(SCOPE, k.routine_id, k.run_id).fire_at)

    # what the previews showed is what the week claimed (a fire inside the outage is claimed late,
    # by the first tick after it, while its window is open)
    for rid in ("bounded", "limited", "plain"):
        assert claimed[rid] == previews[rid], rid
    assert claimed["bounded"][0] == T0 + DAY + 4 * HOUR, "the first 6-hourly fire at or after not_before"
    assert claimed["bounded"][-1] == T0 + 5 * DAY - 2 * HOUR and max(claimed["bounded"]) <= T0 + 5 * DAY
    assert len(claimed["limited"]) == 7
    # the outage: 10:40 and 11:40 got no row (only the latest fire is ever seen); 12:40 was 30 min
    # old at the 13:10 tick, past its 25-minute catch_up: skipped(missed); every other fire claimed
    assert missed["window"] == [WEDNESDAY + 4 * HOUR + 40 * MINUTE]
    gone = {WEDNESDAY + 2 * HOUR + 40 * MINUTE, WEDNESDAY + 3 * HOUR + 40 * MINUTE}
    assert claimed["window"] == [f for f in previews["window"] if f not in gone and f not in missed["window"]]
    assert all(missed[rid] == [] for rid in ("bounded", "limited", "plain"))

    at = clock()
    for rid, state in (("bounded", "finished"), ("limited", "finished"), ("window", "active"), ("plain", "active")):
        assert routine_state(sched.get(SCOPE, rid), at) == state, rid
    assert sched.get(SCOPE, "limited").next_due_at is None and sched.get(SCOPE, "bounded").next_due_at is None
    later = sched.plan(now=at + timedelta(days=30))
    assert {p.routine_id for p in later.due} == {"window", "plain"}, "a finished routine is never due again"
