"""Settings: one reader of the environment, typed errors naming the setting, secrets never shown."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest

from alma_schedule.errors import ConfigurationError
from alma_schedule.settings import Secret, Settings, Timers, load_settings, parse_duration


def test_environment_and_flags_with_flags_winning() -> None:
    s = load_settings({"run_queue": "flagged"}, environ={"ALMA_RUN_QUEUE": "env", "ALMA_TICK_PERIOD": "2m"})
    assert s.run_queue == "flagged"
    assert s.tick_period == timedelta(minutes=2)
    assert load_settings(environ={}) == Settings()
    assert Settings().dead_queue == "alma.dead"


@pytest.mark.parametrize(
    ("environ", "named"),
    [
        ({"ALMA_DATABSE_URL": "x"}, "ALMA_DATABSE_URL"),
        ({"ALMA_CLAIM_LIMIT": "many"}, "ALMA_CLAIM_LIMIT"),
        ({"ALMA_TICK_PERIOD": "soon"}, "ALMA_TICK_PERIOD"),
        ({"ALMA_TASK_EVENTS": "maybe"}, "ALMA_TASK_EVENTS"),
        ({"ALMA_TICK_EXPIRES": "90s"}, "ALMA_TICK_EXPIRES"),
        ({"ALMA_CLOCK": "x"}, "ALMA_CLOCK"),
        ({"ALMA_DEAD_QUEUE": "alma.run"}, "ALMA_DEAD_QUEUE"),
        ({"ALMA_DEAD_QUEUE": "mine", "ALMA_TICK_QUEUE": "mine"}, "ALMA_TICK_QUEUE"),
        ({"ALMA_DEAD_QUEUE": " "}, "ALMA_DEAD_QUEUE"),
    ],
)
def test_unknown_or_malformed_settings_are_named(environ: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigurationError, match=named):
        load_settings(environ=environ)


def test_secrets_never_show_and_compare_in_constant_time() -> None:
    s = load_settings(environ={"ALMA_HTTP_SECRET": "hunter2", "ALMA_OPENAI_API_KEY": "sk-é-ünïcode"})
    assert isinstance(s.http_secret, Secret)
    assert "hunter2" not in repr(s) and "hunter2" not in str(s.describe())
    assert s.http_secret.matches("hunter2") and not s.http_secret.matches("hunter3")
    assert s.openai_api_key == Secret("sk-é-ünïcode")  # non-ASCII secrets compare too
    assert s.openai_api_key != Secret("sk-e-unicode")


@pytest.mark.parametrize(
    ("text", "seconds"), [("90", 90), ("90s", 90), ("15m", 900), ("2h", 7200), ("1d", 86400), ("1h30m", 5400)]
)
def test_durations(text: str, seconds: int) -> None:
    assert parse_duration("X", text) == timedelta(seconds=seconds)


def test_backoff_doubles_and_caps() -> None:
    first, cap = timedelta(minutes=2), timedelta(minutes=30)
    assert [Timers.backoff(first, cap, n).total_seconds() for n in range(6)] == [120, 240, 480, 960, 1800, 1800]
    assert Timers.backoff(first, cap, 10_000) == cap


@pytest.mark.parametrize(("period", "expires"), [(60, 55), (10, 9), (2, 1), (120, 110), (24, 22)])
def test_tick_expires_is_derived_from_the_period(period: int, expires: int) -> None:
    s = load_settings(environ={"ALMA_TICK_PERIOD": f"{period}s"})
    assert s.tick_expires == timedelta(seconds=expires)
    assert Settings(tick_period=timedelta(seconds=period)).tick_expires == timedelta(seconds=expires)  # in code too
    assert Settings().replace(tick_period=timedelta(seconds=period)).tick_expires == timedelta(seconds=expires)


def test_an_explicit_tick_expires_wins_and_one_at_or_above_the_period_is_refused_naming_both() -> None:
    s = load_settings(environ={"ALMA_TICK_PERIOD": "10s", "ALMA_TICK_EXPIRES": "5s"})
    assert s.tick_expires == timedelta(seconds=5)
    assert s.replace(tick_period=timedelta(seconds=20)).tick_expires == timedelta(seconds=5)  # set, not derived
    for environ in ({"ALMA_TICK_PERIOD": "10s", "ALMA_TICK_EXPIRES": "10s"}, {"ALMA_TICK_EXPIRES": "90s"}):
        with pytest.raises(ConfigurationError) as err:
            load_settings(environ=environ)
        text = str(err.value)
        assert "ALMA_TICK_EXPIRES" in text and "ALMA_TICK_PERIOD" in text and "\n" not in text
    with pytest.raises(ConfigurationError, match=r"ALMA_TICK_EXPIRES.*ALMA_TICK_PERIOD"):
        Settings(tick_period=timedelta(seconds=10), tick_expires=timedelta(seconds=30))
    for bad in ("1s", "0s"):
        with pytest.raises(ConfigurationError, match="ALMA_TICK_PERIOD"):
            load_settings(environ={"ALMA_TICK_PERIOD": bad})


def test_glob_lists_from_the_environment_and_the_apps_configuration() -> None:
    env = {"ALMA_TASK_ALLOW": " proj.reports.*,billing.close , ", "ALMA_QUEUE_ALLOW": ""}
    s = load_settings(environ=env)
    assert s.task_allow == ("proj.reports.*", "billing.close") and s.queue_allow == ()
    assert load_settings(environ={}, conf={"alma_queue_allow": ["reports", "fleet.*"]}).queue_allow == (
        "reports",
        "fleet.*",
    )
    assert load_settings(environ={}).task_allow == ()


@pytest.mark.parametrize(
    ("environ", "conf", "named"),
    [
        ({"ALMA_TASK_ALLOW": "proj.a, proj b"}, {}, "ALMA_TASK_ALLOW: 'proj b' is not a glob"),
        ({}, {"alma_queue_allow": 5}, "alma_queue_allow: expected comma-separated globs"),
        ({}, {"alma_task_allow": ["ok", 3]}, "alma_task_allow: expected comma-separated globs"),
    ],
)
def test_a_malformed_glob_list_is_named(environ: dict[str, str], conf: dict[str, object], named: str) -> None:
    with pytest.raises(ConfigurationError, match=re.escape(named)):
        load_settings(environ=environ, conf=conf)
