"""The tick: no replay, anchoring, one-shots, planning errors, overlap, supersession, the streak,
re-sends, the clamp, dispatcher failures, blocked runs, maintenance and the report."""

from __future__ import annotations

from datetime import timedelta

from engine_support import DAY, HOUR, MINUTE, SCOPE, T0, RecordingDispatcher, every_store, spec

from alma_schedule.core.zones import zone_data
from alma_schedule.model import BlockedWhy, Routine, TickReport


def _ledger(sched, routine_id="r1"):
    rows = sched.runs(SCOPE, routine_id=routine_id, limit=1000)
    return sorted((r.run_id, r.state, r.reason) for r in rows)


@every_store
def test_missed_fires_are_not_replayed_after_three_days_down(make, clock, runner) -> None:
    sched = make()
    sched.register(spec("r1", {"cron": "0 9 * * *"}))
    clock.set(T0.replace(hour=9))
    sched.tick()
    clock.set(T0.replace(hour=10) + 3 * DAY)  # down for three days
    report = sched.tick()
    assert [k.run_id for k in report.claimed] == ["2026-03-05T09:00:00Z"]
    assert sched.tick().claimed == ()
    assert runner.ran() == ["2026-03-02T09:00:00Z", "2026-03-05T09:00:00Z"]
    assert _ledger(sched) == [
        ("2026-03-02T09:00:00Z", "completed", "ok"),
        ("2026-03-05T09:00:00Z", "completed", "ok"),
    ]


def test_every_stays_anchored_across_irregular_ticks_and_slow_runs(make, clock, runner) -> None:
    clock.set(T0 + timedelta(seconds=13))
    sched = make()
    sched.register(spec("r1", {"every": "10m"}))
    slow = timedelta(minutes=4)
    runner.on_run = lambda routine, handle: clock.advance(slow)  # each run takes 4 minutes
    for offset in (3, 11, 26, 27, 58, 61):
        clock.set(T0 + offset * MINUTE)
        sched.tick()
    assert runner.ran() == [f"2026-03-02T08:{m:02d}:13Z" for m in (10, 20, 50)] + ["2026-03-02T09:00:13Z"]


def test_at_runs_once(make, clock, runner) -> None:
    sched = make()
    sched.register(spec("r1", {"at": (T0 + HOUR).isoformat()}))
    for offset in (59, 61, 62, 120, 24 * 60):
        clock.set(T0 + offset * MINUTE)
        sched.tick()
    assert runner.ran() == ["2026-03-02T09:00:00Z"]
    assert sched.get(SCOPE, "r1").next_due_at is None


@every_store
def test_one_broken_routine_is_one_error_on_every_tick_with_back_off_and_the_others_run(
    make, clock, runner, store
) -> None:
    def resolver(routine: Routine):
        if routine.routine_id == "broken":
            raise LookupError("no tenant runner")
        return runner

    sched = make(runner_=resolver, defer_first=timedelta(minutes=2), defer_max=timedelta(minutes=8))
    for rid in ("a", "broken", "c"):
        # registered through the store: register() itself would refuse the broken resolver
        sched.register(spec(rid, {"cron": "* * * * *"})) if rid != "broken" else None
    ok = sched.get(SCOPE, "a")
    store.put_routine(
        Routine(SCOPE.org, SCOPE.uid, "broken", "script", {"cron": "* * * * *"}, {}, T0, "rev", next_due_at=T0),
        now=T0,
    )
    clock.set(T0 + MINUTE)
    first = sched.tick()
    assert [e.routine for e in first.errors] == ["org-a/user-1/broken"]
    error = "UnknownKind: no runner for kind 'script': LookupError"
    assert (first.errors[0].error, first.errors[0].until, first.erroring_count) == (error, T0 + 3 * MINUTE, 1)
    assert sorted(k.routine_id for k in first.claimed) == ["a", "c"]
    deferred = store.get_routine(SCOPE, "broken")
    assert (deferred.defer_until, deferred.error_count) == (T0 + 3 * MINUTE, 1)
    clock.set(T0 + 2 * MINUTE)
    backed_off = sched.tick()  # not even looked at, and still reported: its error, its next attempt
    assert [(e.routine, e.error, e.until) for e in backed_off.errors] == [
        ("org-a/user-1/broken", error, T0 + 3 * MINUTE)
    ]
    clock.set(T0 + 3 * MINUTE)
    again = sched.tick()
    assert [(e.routine, e.until) for e in again.errors] == [("org-a/user-1/broken", T0 + 7 * MINUTE)]  # doubled
    assert again.erroring_count == 1 and again.to_dict()["erroring"] == 1
    assert store.get_routine(SCOPE, "broken").defer_until == T0 + 7 * MINUTE
    assert sorted(k.routine_id for k in again.claimed) == ["a", "c"]
    assert ok.routine_id == "a"


def test_a_bad_schedule_row_is_deferred_not_raised(make, clock, store) -> None:
    sched = make()
    store.put_routine(
        Routine(SCOPE.org, SCOPE.uid, "bad", "script", {"cron": "99 * * * *"}, {}, T0, "rev", next_due_at=T0),
        now=T0,
    )
    report = sched.tick()
    assert len(report.errors) == 1
    assert report.errors[0].error.startswith("InvalidSchedule:")


@every_store
def test_overlap_while_a_run_is_active(make, clock) -> None:
    sched = make()
    sched.register(spec("r1", {"cron": "*/5 * * * *"}, behave="submit", polls=99))
    for minutes in (5, 10, 15):
        clock.set(T0 + minutes * MINUTE)
        sched.tick()
    assert _ledger(sched) == [
        ("2026-03-02T08:05:00Z", "submitted", None),
        ("2026-03-02T08:10:00Z", "skipped", "overlap"),
        ("2026-03-02T08:15:00Z", "skipped", "overlap"),
    ]


@every_store
def test_a_pending_claimed_fire_is_superseded_never_run_late(make, clock, runner) -> None:
    disp = RecordingDispatcher()
    sched = make(dispatcher=disp)
    sched.register(spec("r1", {"cron": "*/5 * * * *"}))
    clock.set(T0 + 5 * MINUTE)
    sched.tick()  # the message is lost
    clock.set(T0 + 10 * MINUTE)
    report = sched.tick()
    assert [k.run_id for k in report.claimed] == ["2026-03-02T08:10:00Z"]
    assert [k.run_id for k in report.skipped] == ["2026-03-02T08:05:00Z"]
    old, new = disp.runs[0], disp.runs[1]
    assert sched.execute(old.key).reason == "missed"
    sched.execute(new.key)
    assert runner.ran() == ["2026-03-02T08:10:00Z"]
    assert _ledger(sched) == [
        ("2026-03-02T08:05:00Z", "skipped", "missed"),
        ("2026-03-02T08:10:00Z", "completed", "ok"),
    ]


def test_a_late_message_never_runs_past_its_window(make, clock, runner) -> None:
    disp = RecordingDispatcher()
    sched = make(dispatcher=disp)
    sched.register(spec("r1", {"cron": "0 * * * *"}))
    clock.set(T0 + HOUR)
    sched.tick()
    clock.set(T0 + 2 * HOUR + timedelta(seconds=1))  # delivered after the next fire, before a tick
    late = sched.execute(disp.runs[0].key)
    assert late.state == "claimed"
    assert runner.ran() == []
    sched.tick()
    assert _ledger(sched)[0] == ("2026-03-02T09:00:00Z", "skipped", "missed")


@every_store
def test_failure_streak_latches_a_pause_and_a_completion_resets_it(make, clock, store) -> None:
    sched = make(failure_threshold=3)
    sched.register(spec("r1", {"cron": "*/5 * * * *"}, behave="fail"))
    for i in (1, 2):
        clock.set(T0 + 5 * i * MINUTE)
        sched.tick()
    assert sched.get(SCOPE, "r1").consecutive_failures == 2
    sched.register(spec("r1", {"cron": "*/5 * * * *"}, behave="ok"))
    clock.set(T0 + 15 * MINUTE)
    sched.tick()
    assert sched.get(SCOPE, "r1").consecutive_failures == 0
    sched.register(spec("r1", {"cron": "*/5 * * * *"}, behave="raise"))
    for i in (4, 5, 6, 7):
        clock.set(T0 + 5 * i * MINUTE)
        sched.tick()
    r = sched.get(SCOPE, "r1")
    assert (r.paused_reason, r.next_due_at, r.consecutive_failures) == (
        "failure_streak:runner_error",
        None,
        3,
    )
    assert [x[1:] for x in _ledger(sched)[-3:]] == [("failed", "runner_error")] * 3
    assert len(_ledger(sched)) == 6  # 08:35 was not claimed: paused


def test_clock_ahead_tick_claims_nothing_early_and_advances_no_cursor(make, clock, store) -> None:
    sched = make()
    sched.register(spec("r1", {"cron": "0 9 * * *"}))
    sched.register(spec("r2", {"every": "1h"}))
    report = sched.tick(now=T0 + 365 * DAY)
    assert report.at == T0 + sched.settings.clock_tolerance
    assert report.claimed == ()
    for rid in ("r1", "r2"):
        r = sched.get(SCOPE, rid)
        assert r.last_fire is None
        assert r.registered_at == T0
    assert store.last_tick() == T0 + sched.settings.clock_tolerance


@every_store
def test_a_dispatcher_that_raises_loses_nothing(make, clock, runner) -> None:
    disp = RecordingDispatcher()
    disp.fail = True
    sched = make(dispatcher=disp)
    sched.register(spec("r1", {"cron": "0 9 * * *"}))
    clock.set(T0.replace(hour=9))
    report = sched.tick()
    assert [k.run_id for k in report.claimed] == ["2026-03-02T09:00:00Z"]
    assert [e.routine for e in report.errors] == ["<dispatcher>"]
    assert "ConnectionError" in report.errors[0].error
    disp.fail = False
    clock.set(T0.replace(hour=9, minute=1))
    assert sched.tick().resent == ()  # re-sends start after resend_first (2 minutes)
    clock.set(T0.replace(hour=9, minute=2))
    resent = sched.tick().resent
    assert [k.run_id for k in resent] == ["2026-03-02T09:00:00Z"]
    sched.execute(disp.runs[0].key)
    clock.set(T0.replace(hour=9, minute=30))
    assert sched.tick().resent == ()
    assert runner.ran() == ["2026-03-02T09:00:00Z"]


def test_resends_pause_while_the_run_queue_is_deep_but_expiry_still_runs(make, clock) -> None:
    disp = RecordingDispatcher(depth=50)
    sched = make(dispatcher=disp, resend_pause_depth=10)
    sched.register(spec("r1", {"at": (T0 + MINUTE).isoformat()}))
    sched.register(spec("r2", {"at": (T0 + 2 * MINUTE).isoformat()}))
    clock.set(T0 + MINUTE)
    sched.tick()
    clock.set(T0 + 2 * MINUTE)
    sched.tick()
    clock.set(T0 + 61 * MINUTE)  # r1's one-shot window (1 hour) has closed, r2's has not
    report = sched.tick()
    assert report.sends_paused
    assert report.resent == ()
    assert [k.routine_id for k in report.expired] == ["r1"]
    disp.depth = None  # unknown depth: sends go on
    report = sched.tick()
    assert not report.sends_paused
    assert [k.routine_id for k in report.resent] == ["r2"]


def _started(make, clock):
    """A routine every 5 minutes (run_time_limit 5 min) whose 08:05 fire a worker started (and died)."""
    disp = RecordingDispatcher()
    sched = make(dispatcher=disp, run_time_limit=timedelta(minutes=5))
    sched.register(spec("r1", {"cron": "*/5 * * * *"}))
    clock.set(T0 + 5 * MINUTE)
    sched.tick()
    key = disp.runs[0].key
    sched.store.start(key, now=clock())
    return sched, key


@every_store
def test_blocked_runs_are_reported_every_tick(make, clock) -> None:
    sched, _ = _started(make, clock)
    clock.set(T0 + 15 * MINUTE)
    assert sched.tick().blocked == ()  # exactly 2x the limit: not yet
    for minutes in (16, 30, 60):
        clock.set(T0 + minutes * MINUTE)
        report = sched.tick()
        assert [k.run_id for k in report.blocked] == ["2026-03-02T08:05:00Z"]
        assert report.to_dict()["blocked"] == 1
    assert all(state == "skipped" for _, state, _ in _ledger(sched)[1:])


@every_store
def test_a_marked_run_is_blocked_at_once_with_its_why(make, clock) -> None:
    sched, key = _started(make, clock)
    assert sched.tick().blocked == ()  # young: the age rule says nothing yet
    assert sched.store.mark_blocked(key, why=BlockedWhy.WORKER_LOST, now=clock())
    report = sched.tick()
    assert (report.blocked, report.blocked_why) == ((key,), ("worker_lost",))
    ids = report.to_dict()["ids"]
    assert (ids["blocked"], ids["blocked_why"]) == ([str(key)], ["worker_lost"])
    plan = sched.plan()
    assert (plan.blocked, plan.blocked_why) == ((key,), ("worker_lost",))
    assert sched.store.get(key).state == "running"  # the marker never moves the state


def test_the_report(make, clock) -> None:
    sched = make(dispatcher=RecordingDispatcher())
    for i in range(7):
        sched.register(spec(f"r{i}", {"cron": "0 9 * * *"}))
    clock.set(T0.replace(hour=9))
    report = sched.tick()
    assert isinstance(report, TickReport)
    d = report.to_dict()
    assert (d["at"], d["claimed"], d["skipped"], d["errors"], d["blocked"]) == (
        "2026-03-02T09:00:00+00:00",
        7,
        0,
        0,
        0,
    )
    assert len(d["ids"]["claimed"]) == 5
    assert d["ids"]["claimed"][0].endswith("/2026-03-02T09:00:00Z")


def test_claims_loop_in_batches(make, clock) -> None:
    disp = RecordingDispatcher()
    sched = make(dispatcher=disp, claim_limit=3, tick_max_batches=2)
    for i in range(8):
        sched.register(spec(f"r{i}", {"cron": "0 9 * * *"}))
    clock.set(T0.replace(hour=9))
    assert len(sched.tick().claimed) == 6  # two batches of three, then the bound
    assert len(sched.tick().claimed) == 2
    assert len(disp.runs) == 8


def test_every_fire_decided_leaves_one_row(make, clock, runner) -> None:
    sched = make()
    sched.register(spec("ok", {"cron": "*/10 * * * *"}))
    sched.register(spec("job", {"cron": "*/10 * * * *"}, behave="submit", polls=2))
    sched.register(spec("bad", {"cron": "*/10 * * * *"}, behave="fail"))
    fired = set()
    for minutes in range(0, 61, 5):
        clock.set(T0 + minutes * MINUTE)
        report = sched.tick()
        fired |= {str(k) for k in report.claimed + report.skipped}
    rows = {str(r.key) for rid in ("ok", "job", "bad") for r in sched.runs(SCOPE, routine_id=rid, limit=1000)}
    assert rows == fired
    assert len(rows) == 7 + 7 + 5  # "bad" latched its pause after 5 failures
    assert sched.get(SCOPE, "bad").paused_reason == "failure_streak:provider_error"
    assert all(r.reason is not None for r in sched.runs(SCOPE, limit=1000) if r.terminal)


@every_store
def test_the_tick_report_and_the_plan_carry_the_wake_up_hint(make, clock, store) -> None:
    sched = make()
    sched.register(spec("quarter", {"cron": "*/15 * * * *"}))
    sched.register(spec("nine", {"cron": "0 9 * * *"}))
    clock.set(T0 + MINUTE)
    # the plan: the fire it would claim leaves a re-send at +resend_first (2 min) before anything else
    assert sched.plan().next_wake_at == T0 + 3 * MINUTE
    report = sched.tick()  # the run completed in process: the next instant is the next quarter
    assert report.next_wake_at == T0 + 15 * MINUTE == store.next_wake_at()
    assert report.to_dict()["next_wake_at"] == "2026-03-02T08:15:00+00:00"
    clock.set(T0 + 2 * MINUTE)
    assert sched.plan().next_wake_at == T0 + 15 * MINUTE
    sched.pause(SCOPE, "quarter", "operator")
    assert sched.tick().next_wake_at == T0 + HOUR


@every_store
def test_the_first_tick_under_new_zone_data_rederives_every_next_fire_once(make, clock, store) -> None:
    sched = make(claim_limit=2)
    for rid in ("a", "b", "c"):
        sched.register(spec(rid, {"cron": "0 9 * * *", "tz": "Europe/Lisbon"}))
    store.reconcile_zone_data(lambda r: T0 + DAY * 30, "tzdata 1999a", limit=10)  # "computed under old rules"
    assert {r.next_due_at for r in store.iter_routines()} == {T0 + DAY * 30}
    clock.set(T0 + MINUTE)
    sched.tick()  # one page (claim_limit = 2) ...
    sched.tick()  # ... and the rest: the store now records this process's zone data
    assert {r.next_due_at for r in store.iter_routines()} == {T0.replace(hour=9)}  # 09:00 Lisbon = 09:00 UTC
    assert store.reconcile_zone_data(lambda r: None, zone_data(), limit=10).previous == zone_data()
    assert {r.tzdata_version for r in store.iter_routines()} == {zone_data()}
