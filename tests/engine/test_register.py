"""register: validation, the content-hash revision, the cursor rules, tombstones, the clock clamp."""

from __future__ import annotations

from datetime import timedelta

import pytest
from engine_support import DAY, HOUR, MINUTE, SCOPE, T0, RecordingDispatcher, every_store, spec

from alma_schedule.engine import RegistrationReceipt
from alma_schedule.errors import InvalidInput, RegistrationRefused


def test_new_routine_receipt(make) -> None:
    sched = make()
    receipt = sched.register(spec("r1", {"cron": "0 9 * * *"}, text="hi"))
    assert isinstance(receipt, RegistrationReceipt)
    assert receipt.changed
    r = receipt.routine
    assert (r.registered_at, r.last_fire, r.next_due_at) == (T0, None, T0.replace(hour=9))
    assert len(r.config_revision) == 64
    assert receipt.next_fires == (T0.replace(hour=9), T0.replace(hour=9) + DAY, T0.replace(hour=9) + 2 * DAY)
    assert receipt.warnings == ()
    assert receipt.to_dict()["next_fires"][0] == "2026-03-02T09:00:00+00:00"
    assert [v.config_revision for v in sched.versions(SCOPE, "r1")] == [r.config_revision]


def test_unchanged_reregistration_is_a_no_op(make, clock) -> None:
    sched = make()
    first = sched.register(spec("r1", {"every": "15m"})).routine
    clock.advance(HOUR)
    again = sched.register(spec("r1", {"every": 900}))  # the same interval, written differently
    assert not again.changed
    assert again.routine == first
    assert len(sched.versions(SCOPE, "r1")) == 1


def test_definition_change_keeps_the_cursor(make, clock) -> None:
    sched = make(dispatcher=RecordingDispatcher())
    sched.register(spec("r1", {"cron": "*/10 * * * *"}, text="a"))
    clock.set(T0 + 25 * MINUTE)
    sched.tick()
    before = sched.get(SCOPE, "r1")
    assert before.last_fire == T0 + 20 * MINUTE
    clock.set(T0 + 27 * MINUTE)
    receipt = sched.register(spec("r1", {"cron": "*/10 * * * *"}, text="b"))
    after = receipt.routine
    assert receipt.changed
    assert after.config_revision != before.config_revision
    assert (after.registered_at, after.last_fire, after.next_due_at) == (
        before.registered_at,
        before.last_fire,
        before.next_due_at,
    )
    assert len(sched.versions(SCOPE, "r1")) == 2


def test_schedule_change_restarts_the_cursor_at_now_and_keeps_the_anchor(make, clock) -> None:
    sched = make()
    sched.register(spec("r1", {"cron": "0 9 * * *"}))
    clock.set(T0 + 3 * HOUR + timedelta(seconds=30))
    after = sched.register(spec("r1", {"cron": "0 12 * * *"})).routine
    assert after.registered_at == T0
    assert after.last_fire == clock()
    assert after.next_due_at == T0.replace(hour=12)
    clock.set(T0 + 5 * HOUR)  # 13:00: re-derived from now, so today's noon is already behind it
    later = sched.register(spec("r1", {"cron": "0 12,18 * * *"})).routine
    assert (later.last_fire, later.next_due_at) == (T0 + 5 * HOUR, T0.replace(hour=18))


def test_every_anchor_moves_only_when_the_interval_changes(make, clock) -> None:
    sched = make()
    sched.register(spec("r1", {"every": "15m"}))
    t1 = clock.set(T0 + 7 * MINUTE)
    moved = sched.register(spec("r1", {"every": "20m"})).routine
    assert (moved.registered_at, moved.last_fire, moved.next_due_at) == (t1, t1, t1 + 20 * MINUTE)
    clock.set(T0 + 9 * MINUTE)
    cron = sched.register(spec("r1", {"cron": "0 * * * *"})).routine
    assert cron.registered_at == t1  # type changed away from every: the anchor stays
    t3 = clock.set(T0 + 11 * MINUTE)
    back = sched.register(spec("r1", {"every": "20m"})).routine
    assert back.registered_at == t3  # the type became every: a new anchor


def test_every_shorter_than_the_tick_period_warns(make) -> None:
    receipt = make().register(spec("r1", {"every": "30s"}))
    assert len(receipt.warnings) == 1
    assert "shorter than the tick period" in receipt.warnings[0]
    assert receipt.next_fires[0] == T0 + timedelta(seconds=30)


@pytest.mark.parametrize(
    ("schedule", "needle"),
    [
        ({"cron": "61 * * * *"}, "minute"),
        ({"cron": "0 9 * * *", "tz": "Mars/Olympus"}, "Mars/Olympus"),
        ({"at": (T0 - MINUTE).isoformat()}, "earlier than now"),
        ({"every": "0s"}, "interval"),
        ({"hourly": True}, "hourly"),
    ],
)
def test_refuses_what_a_tick_could_not_run(make, schedule, needle) -> None:
    with pytest.raises(RegistrationRefused) as err:
        make().register(spec("r1", schedule))
    assert needle in str(err.value)


def test_runner_validation_refuses_with_its_message(make, store) -> None:
    with pytest.raises(RegistrationRefused, match="budget widens the host cap"):
        make().register(spec("r1", refuse="budget widens the host cap"))
    assert store.get_routine(SCOPE, "r1") is None


def test_resolver_that_cannot_serve_the_kind_refuses(make, runner) -> None:
    def resolver(routine):
        if routine.kind == "nope":
            raise KeyError(routine.kind)
        return runner

    sched = make(runner_=resolver)
    with pytest.raises(RegistrationRefused, match="no runner for kind 'nope'"):
        sched.register(spec("r1", kind="nope"))
    assert sched.register(spec("r2")).changed


def test_definition_must_be_json(make) -> None:
    with pytest.raises(RegistrationRefused, match="definition"):
        make().register(spec("r1", when=T0))


def test_bad_ids_are_invalid_input(make) -> None:
    with pytest.raises(InvalidInput):
        make().register(spec("bad\x00id"))


def test_runner_configuration_is_part_of_the_revision(make, runner) -> None:
    sched = make()
    first = sched.register(spec("r1")).routine
    assert not sched.register(spec("r1")).changed
    runner.inputs["model"] = "gpt-x"
    second = sched.register(spec("r1"))
    assert second.changed
    assert second.routine.config_revision != first.config_revision
    assert second.routine.last_fire is None  # the schedule did not change: the cursor is kept


@every_store
def test_reregistering_a_tombstoned_id_is_refused_while_its_run_is_open(make, clock) -> None:
    disp = RecordingDispatcher()
    sched = make(dispatcher=disp)
    sched.register(spec("r1", {"cron": "*/5 * * * *"}))
    clock.set(T0 + 5 * MINUTE)
    sched.tick()
    (claimed,) = disp.runs
    sched.delete(SCOPE, "r1")
    with pytest.raises(RegistrationRefused) as err:
        sched.register(spec("r1", {"cron": "*/5 * * * *"}))
    assert claimed.run_id in str(err.value)
    assert sched.execute(claimed.key).reason == "deleted"  # the run ends skipped(deleted)
    fresh = sched.register(spec("r1", {"cron": "*/5 * * * *"}))
    assert fresh.changed
    assert fresh.routine.registered_at == clock()
    assert fresh.routine.last_fire is None


def test_clock_ahead_registration_moves_no_anchor(make) -> None:
    sched = make()
    r = sched.register(spec("r1", {"every": "1h"}), now=T0 + 365 * DAY).routine
    tolerance = sched.settings.clock_tolerance
    assert r.registered_at == T0 + tolerance  # clamped to clock() + clock_tolerance
    assert r.next_due_at == T0 + tolerance + HOUR


def test_register_is_an_upsert_and_mode_narrows_it(make, clock) -> None:
    from alma_schedule.errors import NotFound

    sched = make()
    assert sched.register(spec("r1", {"every": "15m"}, text="a")).changed
    assert sched.register(spec("r1", {"every": "15m"}, text="b")).changed  # the API stays an upsert
    with pytest.raises(RegistrationRefused, match=r"^routine org-a/user-1/r1 already exists$"):
        sched.register(spec("r1", {"every": "15m"}, text="c"), mode="create")
    assert sched.get(SCOPE, "r1").definition["text"] == "b"  # nothing written
    with pytest.raises(NotFound, match=r"^not found: routine org-a/user-1/r2$"):
        sched.register(spec("r2", {"every": "15m"}), mode="update")
    assert sched.store.get_routine(SCOPE, "r2", include_deleted=True) is None
    assert sched.register(spec("r1", {"every": "15m"}, text="d"), mode="update").changed
    assert sched.register(spec("r2", {"every": "15m"}), mode="create").changed
    sched.delete(SCOPE, "r2")
    assert sched.register(spec("r2", {"every": "15m"}), mode="create").changed  # a tombstoned id is free
    with pytest.raises(InvalidInput, match="mode"):
        sched.register(spec("r3", {"every": "15m"}), mode="replace")  # type: ignore[arg-type]
