"""The pure ``decide``: literal instants in, Fire / NotDue out (no store, no clock)."""

from __future__ import annotations

from datetime import timedelta

from engine_support import DAY, HOUR, MINUTE, T0

from alma_schedule.engine import decide
from alma_schedule.model import Fire, NotDue, Routine
from alma_schedule.settings import Settings

S = Settings(clock=lambda: T0)


def routine(schedule: dict[str, object], *, registered_at=T0 - 10 * DAY, last_fire=None, **kw: object) -> Routine:
    return Routine(
        "o",
        "u",
        "r",
        "script",
        schedule,
        {},
        registered_at=registered_at,
        config_revision="rev",
        last_fire=last_fire,
        **kw,  # type: ignore[arg-type]
    )


def test_after_three_days_down_a_daily_routine_fires_once_for_its_latest_fire() -> None:
    last = T0.replace(hour=9) - 4 * DAY  # last ran four days ago, 09:00
    now = T0.replace(hour=10)  # three fires were missed; today's 09:00 is the latest
    d = decide(routine({"cron": "0 9 * * *"}, last_fire=last), now, S)
    assert isinstance(d, Fire)
    assert d.run_id == "2026-03-02T09:00:00Z"
    assert d.fire_at == T0.replace(hour=9)
    assert d.expires_at == T0.replace(hour=9) + DAY  # eligible until the next fire
    assert d.next_due_at == T0.replace(hour=9) + DAY
    assert d.resend_at == now + S.resend_first
    assert not d.missed


def test_not_due_when_the_latest_fire_is_not_after_the_cursor() -> None:
    d = decide(routine({"cron": "0 9 * * *"}, last_fire=T0.replace(hour=9)), T0.replace(hour=10), S)
    assert d == NotDue(T0.replace(hour=9) + DAY)


def test_cursor_ahead_of_now_keeps_the_index_after_the_cursor() -> None:
    cursor = T0 + 30 * MINUTE  # a restart written at a later instant than this tick's now
    d = decide(routine({"every": "15m"}, registered_at=T0 - HOUR, last_fire=cursor), T0, S)
    assert d == NotDue(T0 + 45 * MINUTE)


def test_every_is_anchored_on_registration() -> None:
    anchor = T0 + timedelta(seconds=7)
    d = decide(routine({"every": "15m"}, registered_at=anchor), T0 + 52 * MINUTE, S)
    assert isinstance(d, Fire)
    assert d.fire_at == anchor + 45 * MINUTE
    assert d.run_id == "2026-03-02T08:45:07Z"
    assert d.expires_at == anchor + 60 * MINUTE
    assert d.next_due_at == anchor + 60 * MINUTE


def test_nothing_before_registration() -> None:
    d = decide(routine({"cron": "0 9 * * *"}, registered_at=T0.replace(hour=9, minute=30)), T0.replace(hour=10), S)
    assert d == NotDue(T0.replace(hour=9) + DAY)


def test_at_fires_once_within_the_one_shot_window() -> None:
    when = T0 + HOUR
    r = routine({"at": when.isoformat()}, registered_at=T0)
    d = decide(r, when + 10 * MINUTE, S)
    assert isinstance(d, Fire)
    assert (d.fire_at, d.expires_at, d.next_due_at, d.missed) == (when, when + S.one_shot_window, None, False)
    assert decide(routine({"at": when.isoformat()}, registered_at=T0, last_fire=when), when + MINUTE, S) == NotDue(None)


def test_at_past_its_window_is_recorded_missed() -> None:
    when = T0 + HOUR
    d = decide(routine({"at": when.isoformat()}, registered_at=T0), when + 2 * HOUR, S)
    assert isinstance(d, Fire)
    assert d.missed


def test_max_catch_up_caps_the_window() -> None:
    s = S.replace(max_catch_up=timedelta(minutes=10))
    fire = T0.replace(hour=9)
    d = decide(routine({"cron": "0 9 * * *"}), fire + 5 * MINUTE, s)
    assert isinstance(d, Fire)
    assert (d.expires_at, d.missed) == (fire + 10 * MINUTE, False)
    late = decide(routine({"cron": "0 9 * * *"}), fire + HOUR, s)
    assert isinstance(late, Fire)
    assert late.missed
    assert late.next_due_at == fire + DAY


def test_inactive_routines_are_never_due() -> None:
    for extra in ({"enabled": False}, {"paused_reason": "manual"}, {"deleted_at": T0}):
        assert decide(routine({"cron": "* * * * *"}, **extra), T0, S) == NotDue(None)


def test_dst_spring_forward_fixed_time_fires_once_at_the_gap() -> None:
    # 02:30 does not exist in New York on 2026-03-08: the fixed-time job fires once, at 03:00 EDT.
    r = routine({"cron": "30 2 * * *", "tz": "America/New_York"}, last_fire=T0.replace(day=7, hour=7, minute=30))
    now = T0.replace(day=8, hour=12)
    d = decide(r, now, S)
    assert isinstance(d, Fire)
    assert d.run_id == "2026-03-08T07:00:00Z"
    assert d.next_due_at == T0.replace(day=9, hour=6, minute=30)
