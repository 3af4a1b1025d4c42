"""Settings from a fleet app's ``alma_*`` keys and ``ALMA_*`` variables: one loader, a did-you-mean,
an unvalidated peek for processes that run none of our code, and the lost-send refusal."""

from __future__ import annotations

from datetime import timedelta

import pytest

from alma_schedule.errors import ConfigurationError
from alma_schedule.settings import LISTED_BY, load_settings, peek, queue_names, refuse_lost_sends

PG = "postgresql+psycopg://alma@db/alma"


def test_app_keys_are_settings_the_environment_overrides_them_and_flags_override_both() -> None:
    conf = {"alma_database_url": PG, "alma_tick_period": 120, "alma_run_queue": "conf.run", "broker_url": "x://"}
    s = load_settings(conf=conf, environ={})
    assert s.database_url == PG and s.tick_period == timedelta(seconds=120) and s.run_queue == "conf.run"
    s = load_settings(conf=conf, environ={"ALMA_RUN_QUEUE": "env.run"})
    assert s.run_queue == "env.run" and s.database_url == PG
    s = load_settings({"run_queue": "flag.run"}, conf=conf, environ={"ALMA_RUN_QUEUE": "env.run"})
    assert s.run_queue == "flag.run"


@pytest.mark.parametrize(
    ("conf", "environ", "named", "suggested"),
    [
        ({}, {"ALMA_DATABSE_URL": "x"}, "ALMA_DATABSE_URL", "did you mean ALMA_DATABASE_URL?"),
        ({"alma_databse_url": "x"}, {}, "alma_databse_url", "did you mean alma_database_url?"),
        ({"alma_tick_perod": "1m"}, {}, "alma_tick_perod", "did you mean alma_tick_period?"),
        ({}, {"ALMA_FOO": "1"}, "ALMA_FOO", ""),
    ],
)
def test_unknown_keys_and_variables_are_refused_naming_them_with_a_did_you_mean(
    conf: dict[str, str], environ: dict[str, str], named: str, suggested: str
) -> None:
    with pytest.raises(ConfigurationError) as caught:
        load_settings(conf=conf, environ=environ)
    message = str(caught.value)
    assert named in message and suggested in message and LISTED_BY in message
    assert "--help" not in message and "\n" not in message
    if not suggested:
        assert "did you mean" not in message


def test_a_malformed_app_key_is_named_as_the_app_key() -> None:
    with pytest.raises(ConfigurationError, match="alma_claim_limit: expected an integer"):
        load_settings(conf={"alma_claim_limit": "many"}, environ={})
    with pytest.raises(ConfigurationError, match=r"ALMA_TICK_EXPIRES \(40s\) must be shorter"):
        load_settings(conf={"alma_tick_period": "30s"}, environ={"ALMA_TICK_EXPIRES": "40s"})  # both sources


def test_peek_and_queue_names_validate_nothing() -> None:
    environ = {"ALMA_FOO": "1", "ALMA_TICK_PERIOD": "soon", "ALMA_RUN_QUEUE": "env.run"}
    conf = {"alma_tick_queue": 5, "alma_collect_queue": "conf.collect", "alma_nonsense": object()}
    assert queue_names(conf=conf, environ=environ) == {
        "tick_queue": "alma.tick",  # not text: the default
        "run_queue": "env.run",
        "collect_queue": "conf.collect",
    }
    assert peek("tick_period", conf=conf, environ=environ) == "soon"
    assert peek("celery_app", environ={}) is None


def test_a_production_store_on_the_memory_broker_is_refused_naming_both_settings() -> None:
    with pytest.raises(ConfigurationError) as caught:
        refuse_lost_sends(load_settings(environ={"ALMA_DATABASE_URL": PG}))
    message = str(caught.value)
    assert "ALMA_DATABASE_URL" in message and "ALMA_BROKER_URL" in message and "\n" not in message
    refuse_lost_sends(load_settings(environ={}))  # the embedded default: in-process, nothing lost
    refuse_lost_sends(load_settings(environ={"ALMA_DATABASE_URL": PG, "ALMA_BROKER_URL": "redis://r:6379/0"}))
