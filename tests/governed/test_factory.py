"""The kind registry's factories: configuration errors name the missing setting; nothing toy by default."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from alma_schedule.errors import ConfigurationError
from alma_schedule.model import RunKey
from alma_schedule.runners.governed import (
    Delivery,
    FileSink,
    GovernedBatchRunner,
    GovernedConversationRunner,
    StdoutSink,
)
from alma_schedule.runners.governed.factory import job_runner_from_settings, turn_runner_from_settings
from alma_schedule.runners.governed.scripted import ScriptedProvider
from alma_schedule.runners.registry import KindRegistry
from alma_schedule.settings import load_settings

KEY = RunKey("o", "u", "r", "20260101T080000Z")


def settings(**env: str) -> object:
    return load_settings(environ={f"ALMA_{k.upper()}": v for k, v in env.items()})


@pytest.mark.parametrize(
    ("env", "missing"),
    [
        ({}, "ALMA_PROVIDER"),
        ({"provider": "scripted"}, "ALMA_SINK"),
        ({"provider": "toy", "sink": "stdout"}, "ALMA_PROVIDER"),
        ({"provider": "scripted", "sink": "carrier-pigeon"}, "ALMA_SINK"),
        ({"provider": "scripted", "sink": "file:/no/such/dir/out.jsonl"}, "ALMA_SINK"),
        ({"provider": "openai", "sink": "stdout"}, "ALMA_OPENAI_API_KEY"),
        ({"provider": "scripted", "sink": "webhook"}, "ALMA_WEBHOOK_URL"),
    ],
)
def test_factories_name_the_missing_setting(env: dict[str, str], missing: str) -> None:
    s = settings(**env)
    for factory in (turn_runner_from_settings, job_runner_from_settings):
        with pytest.raises(ConfigurationError, match=missing):
            factory(s)  # type: ignore[arg-type]


def test_the_registry_builds_governed_kinds_only_when_configured(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="ALMA_PROVIDER"):
        KindRegistry(settings(), use_entry_points=False).check(["turn", "job"])  # type: ignore[arg-type]
    s = settings(provider="scripted", sink=f"file:{tmp_path}/out.jsonl", submission_deadline="2h")
    registry = KindRegistry(s, use_entry_points=False)  # type: ignore[arg-type]
    assert registry.check(["turn", "job"]) == ["job", "turn"]
    turn, job = registry.runner("turn"), registry.runner("job")
    assert isinstance(turn, GovernedConversationRunner) and isinstance(turn.provider, ScriptedProvider)
    assert isinstance(job, GovernedBatchRunner) and job.submission_deadline.total_seconds() == 7200


def test_openai_is_built_lazily_from_settings(tmp_path: Path) -> None:
    s = settings(provider="openai", openai_api_key="sk-test", sink="stdout", cap_per_run_micros="5000")
    runner = turn_runner_from_settings(s)  # type: ignore[arg-type]
    assert type(runner.provider).__name__ == "OpenAICompatibleProvider"
    assert runner.host.per_run_micros == 5000
    assert "sk-test" not in json.dumps(runner.config_revision_inputs(_routine()))


def _routine() -> object:
    from datetime import UTC, datetime

    from alma_schedule.model import Routine

    return Routine("o", "u", "r", "turn", {"cron": "0 8 * * *"}, {"goal": "g"}, datetime(2026, 1, 1, tzinfo=UTC), "x")


def test_file_and_stdout_sinks_write_one_json_line_per_delivery(tmp_path: Path) -> None:
    delivery = Delivery.for_run(KEY, "héllo\nworld", 12, ("routine_per_run",), "turn")
    sink = FileSink(tmp_path / "out.jsonl")
    sink.deliver(delivery)
    sink.deliver(delivery)
    assert sink.read() == [delivery, delivery]
    assert len((tmp_path / "out.jsonl").read_text("utf-8").splitlines()) == 2
    stream = io.StringIO()
    StdoutSink(stream).deliver(delivery)
    assert json.loads(stream.getvalue())["idempotency_key"] == delivery.idempotency_key
