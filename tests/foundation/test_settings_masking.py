"""Issue 45, item 5: secrets mask themselves. A password in the database URL, the broker URL or the
result backend, and every secret setting (the tick secret, provider key, webhook secret, metrics
token), never appears in ``repr``/``str`` of :class:`Settings`, in ``describe()``, in
``alma-schedule settings`` or in a command's ``--debug`` output and log lines; the values the code
uses are unchanged."""

from __future__ import annotations

import logging
import os
import traceback

import pytest
from click.testing import CliRunner, Result

from alma_schedule.cli import cli
from alma_schedule.model.secret import mask_url
from alma_schedule.settings import Secret, Settings, load_settings

PASSWORDS = (
    "dbpw-hunter2",
    "brokerpw-7f3a",
    "backendpw-9c1e",
    "tick-s3cret",
    "sk-providerkey",
    "hook-k3y",
    "metrics-t0k",
)
ENV = {
    "ALMA_DATABASE_URL": "postgresql+psycopg://alma:dbpw-hunter2@127.0.0.1:1/alma",
    "ALMA_BROKER_URL": "redis://:brokerpw-7f3a@127.0.0.1:1/0",
    "ALMA_RESULT_BACKEND": "redis://default:backendpw-9c1e@127.0.0.1:1/1",
    "ALMA_HTTP_SECRET": "tick-s3cret",
    "ALMA_OPENAI_API_KEY": "sk-providerkey",
    "ALMA_WEBHOOK_SECRET": "hook-k3y",
    "ALMA_METRICS_TOKEN": "metrics-t0k",
}


def leaked(text: str) -> list[str]:
    return [p for p in PASSWORDS if p in text]


def test_repr_str_and_describe_mask_every_password_and_secret() -> None:
    s = load_settings(environ=ENV)
    assert leaked(repr(s)) == [] and leaked(str(s)) == [] and leaked(repr(s.describe())) == []
    assert s.describe()["database_url"] == "postgresql+psycopg://alma:***@127.0.0.1:1/alma"
    assert s.describe()["broker_url"] == "redis://:***@127.0.0.1:1/0"
    assert s.describe()["result_backend"] == "redis://default:***@127.0.0.1:1/1"
    assert "database_url='postgresql+psycopg://alma:***@127.0.0.1:1/alma'" in repr(s)
    assert s.describe()["http_secret"] == "********"
    # the values the code uses are the real ones
    assert s.database_url == ENV["ALMA_DATABASE_URL"] and s.broker_url == ENV["ALMA_BROKER_URL"]
    assert s.result_backend == ENV["ALMA_RESULT_BACKEND"]
    assert isinstance(s.http_secret, Secret) and s.http_secret.reveal() == "tick-s3cret"
    # a settings object inside a container (a log line's %r) is masked too
    assert leaked(repr([s])) == [] and leaked(f"{s}") == []


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql+psycopg://alma:s3cr%40t@db:5432/alma", "postgresql+psycopg://alma:***@db:5432/alma"),
        ("redis://:pw@r:6379/0", "redis://:***@r:6379/0"),
        ("amqp://u:p@ss/w@h//", "amqp://u:***@h//"),  # an unencoded @ or /: masked up to the last @
        ("sentinel://:a1@h1:26379;sentinel://:b2@h2:26379", "sentinel://:***@h1:26379;sentinel://:***@h2:26379"),
        ("redis://h:6379/0?password=zz&db=1", "redis://h:6379/0?password=***&db=1"),
        ("https://hooks.example/x?token=abc", "https://hooks.example/x?token=***"),
        ("sqlite:///srv/a@b/alma.sqlite3", "sqlite:///srv/a@b/alma.sqlite3"),
        ("rediss://user@h:6380", "rediss://user@h:6380"),
        ("memory://", "memory://"),
    ],
)
def test_mask_url(url: str, shown: str) -> None:
    assert mask_url(url) == shown


def test_a_settings_object_built_in_code_masks_too() -> None:
    s = Settings(database_url="postgresql://u:dbpw-hunter2@db/x", metrics_token=Secret("metrics-t0k"))
    assert leaked(repr(s)) == [] and leaked(str(s.describe())) == []


def run(*args: str) -> Result:
    unset: dict[str, str | None] = {k: None for k in os.environ if k.startswith("ALMA_")}
    return CliRunner().invoke(cli, list(args), env={**unset, **ENV})


def test_the_settings_command_shows_no_password() -> None:
    for args in (("settings",), ("settings", "--json")):
        result = run(*args)
        assert result.exit_code == 0, result.output
        assert leaked(result.output) == []


@pytest.mark.integration  # every table over a store, many examples / unreachable servers
@pytest.mark.parametrize(
    "args",
    [
        ("routines", "list", "--all"),
        ("tick", "--in-process"),
        ("tick",),  # sends through the (unreachable) broker
        ("runs", "list", "acme/alice"),
        ("migrate",),
    ],
)
def test_debug_output_and_log_lines_show_no_password(args: tuple[str, ...], caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    result = run("--debug", *args)
    assert result.exit_code != 0
    # --debug lets the error through: its whole traceback (with its causes) is what would be printed
    shown = "".join(traceback.format_exception(*result.exc_info)) if result.exc_info else ""
    text = result.output + shown
    assert leaked(text) == [], text
    assert leaked(caplog.text) == []
