"""Issue 14, defect 7: the size limits of registration, each a setting named by its refusal; a
stored row over a limit keeps running and ``routines list`` flags it."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from engine_support import HOUR, SCOPE, T0, every_store, spec

from alma_schedule.cli import cli
from alma_schedule.engine.limits import Limits, over_limits
from alma_schedule.errors import ConfigurationError, RegistrationRefused
from alma_schedule.model.money import usd_micros
from alma_schedule.settings import load_settings
from alma_schedule.stores import migrate_store, open_store
from alma_schedule.testing.builders import make_routine


def nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


def refused(sched: Any, routine_spec: Any) -> str:
    with pytest.raises(RegistrationRefused) as info:
        sched.register(routine_spec)
    assert list(sched.store.iter_routines()) == []  # nothing half-written
    message = str(info.value)
    assert "\n" not in message
    return message


@every_store
def test_a_definition_over_max_definition_bytes_is_refused_naming_it(make) -> None:
    message = refused(make(), spec("r1", text="x" * 70_000))
    assert "max_definition_bytes (65536; ALMA_MAX_DEFINITION_BYTES)" in message
    assert make(max_definition_bytes=100_000).register(spec("r1", text="x" * 70_000)).changed


@every_store
def test_a_schedule_over_max_schedule_bytes_is_refused_naming_it(make) -> None:
    cron = {"cron": "0 9 * * *", "tz": "UTC", "padding": "x" * 5000}
    assert "max_schedule_bytes (4096; ALMA_MAX_SCHEDULE_BYTES)" in refused(make(), spec("r1", cron))


@every_store
@pytest.mark.parametrize("where", ["definition", "schedule"])
def test_nesting_deeper_than_max_nesting_depth_is_refused_naming_it(make, where: str) -> None:
    deep = nested(33)
    routine_spec = spec("r1", text=deep) if where == "definition" else spec("r1", {"every": 60, "x": deep})
    message = refused(make(), routine_spec)
    assert message.startswith(f"{where} is nested deeper than 32 levels")
    assert "ALMA_MAX_NESTING_DEPTH" in message
    assert make().register(spec("r1", text=nested(30))).changed


@every_store
def test_thousands_of_levels_are_refused_not_a_recursion_error(make) -> None:
    """0.1.0: ``RecursionError`` from ``canonical_json``."""
    assert "max_nesting_depth" in refused(make(), spec("r1", text=nested(50_000)))
    assert "max_nesting_depth" in refused(make(max_nesting_depth=64), spec("r1", text={"a": nested(5000)}))


@every_store
@pytest.mark.parametrize(
    ("budget", "named"),
    [
        ({"daily_usd": "1e300000"}, "not a plain decimal amount"),  # 0.1.0: seconds of CPU, then accepted
        ({"per_turn_usd": {"usd": 2_000_000}}, "more than 1000000 USD (max_cap_usd, ALMA_MAX_CAP_USD)"),
        ({"per_run_usd": 10**5000}, "more than 1000000 USD"),  # 0.1.0: ValueError converting it to text
        ({"daily_usd": "1" * 25}, "at most 24 characters"),
        ({"daily_usd": "0.0000001"}, "finer than a micro-USD"),
        ({"daily_usd": "\u0661\u0662"}, "not a plain decimal"),  # Arabic-Indic digits: Decimal reads 12
        ({"daily_usd": float("inf")}, "finite"),
    ],
)
def test_money_caps_are_bounded_before_any_conversion(make, budget: dict[str, Any], named: str) -> None:
    assert named in refused(make(), spec("r1", budget=budget))


def test_usd_micros_reads_the_plain_forms_exactly() -> None:
    assert usd_micros("x", "0.25", max_usd=1) == 250_000
    assert usd_micros("x", 1_000_000, max_usd=1_000_000) == 10**12
    assert usd_micros("x", ".5", max_usd=1) == usd_micros("x", 0.5, max_usd=1) == 500_000
    with pytest.raises(RegistrationRefused, match="more than 1 USD"):
        usd_micros("x", "1.000001", max_usd=1)


@every_store
def test_a_stored_row_over_a_lowered_limit_keeps_running_and_is_flagged(make, runner, clock) -> None:
    make().register(spec("big", {"every": 60}, text="x" * 2000, budget={"daily_usd": 5}))
    make().register(spec("small", {"every": 60}))
    lowered = make(max_definition_bytes=1000, max_cap_usd=1)
    stored = {r.routine_id: r for r in lowered.store.iter_routines()}
    assert over_limits(stored["big"], lowered.settings) == ("max_definition_bytes", "max_cap_usd")
    assert over_limits(stored["small"], lowered.settings) == ()
    clock.set(T0 + HOUR)
    lowered.tick()
    assert "big" in {k.routine_id for k, _ in runner.runs}  # still runs
    with pytest.raises(RegistrationRefused, match="max_definition_bytes"):
        lowered.register(spec("big", {"every": 60}, text="y" * 2000))


def test_limits_are_settings_refused_when_out_of_range() -> None:
    assert Limits.from_settings(load_settings(environ={})) == Limits(65_536, 4_096, 32, 1_000_000)
    assert load_settings(environ={"ALMA_MAX_CAP_USD": "5"}).max_cap_usd == 5
    bad = [("ALMA_MAX_DEFINITION_BYTES", "0"), ("ALMA_MAX_NESTING_DEPTH", "65"), ("ALMA_MAX_CAP_USD", "-1")]
    for name, value in bad:
        with pytest.raises(ConfigurationError, match=name):
            load_settings(environ={name: value})


def test_routines_list_flags_a_row_over_a_limit(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/limits.sqlite3"
    migrate_store(url)
    unset: dict[str, str | None] = {k: None for k in os.environ if k.startswith("ALMA_")}
    env: dict[str, str | None] = {**unset, "ALMA_DATABASE_URL": url}

    def run(*args: str, **extra: str) -> str:
        result = CliRunner().invoke(cli, list(args), env={**env, **extra})
        assert result.exit_code == 0, result.output
        return result.output

    store = open_store(url)
    try:
        store.put_routine(make_routine("big", scope=SCOPE, definition={"blob": "x" * 3000}), now=T0)
        store.put_routine(make_routine("small", scope=SCOPE), now=T0)
    finally:
        store.close()
    rows = json.loads(run("routines", "list", str(SCOPE), "--json", ALMA_MAX_DEFINITION_BYTES="1000"))
    assert {r["routine_id"]: r["over_limits"] for r in rows} == {"big": ["max_definition_bytes"], "small": []}
    text = run("routines", "list", str(SCOPE), ALMA_MAX_DEFINITION_BYTES="1000")
    assert "over limits" in text and "max_definition_bytes" in text
    assert "max_definition_bytes" not in run("routines", "list", str(SCOPE))  # under the default: not flagged


def test_a_money_literal_stored_by_0_1_0_is_still_read_and_flagged() -> None:
    from alma_schedule.runners.governed.money import parse_budget

    budget = {"budget": {"daily_usd": "5e-1", "per_turn_usd": " 0.25"}}
    parsed = parse_budget(budget)  # what a run reads: the row keeps running
    assert (parsed.daily_micros, parsed.per_run_micros) == (500_000, 250_000)
    routine = make_routine("old", definition=budget)
    assert over_limits(routine, load_settings(environ={})) == ("max_cap_usd",)  # registration would refuse it
    with pytest.raises(RegistrationRefused, match="what a store can hold"):
        parse_budget({"budget": {"daily_usd": "1e300000"}})  # compared before anything is multiplied
