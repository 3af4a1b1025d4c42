"""Settings: one reader of the environment, typed errors naming the setting, secrets never shown."""

from __future__ import annotations

from datetime import timedelta

import pytest

from alma_schedule.errors import ConfigurationError
from alma_schedule.settings import Secret, Settings, Timers, load_settings, parse_duration


def test_environment_and_flags_with_flags_winning() -> None:
    s = load_settings({"run_queue": "flagged"}, environ={"ALMA_RUN_QUEUE": "env", "ALMA_TICK_PERIOD": "2m"})
    assert s.run_queue == "flagged"
    assert s.tick_period == timedelta(minutes=2)
    assert load_settings(environ={}) == Settings()


@pytest.mark.parametrize(
    ("environ", "named"),
    [
        ({"ALMA_DATABSE_URL": "x"}, "ALMA_DATABSE_URL"),
        ({"ALMA_CLAIM_LIMIT": "many"}, "ALMA_CLAIM_LIMIT"),
        ({"ALMA_TICK_PERIOD": "soon"}, "ALMA_TICK_PERIOD"),
        ({"ALMA_TASK_EVENTS": "maybe"}, "ALMA_TASK_EVENTS"),
        ({"ALMA_TICK_EXPIRES": "90s"}, "ALMA_TICK_EXPIRES"),
        ({"ALMA_CLOCK": "x"}, "ALMA_CLOCK"),
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
