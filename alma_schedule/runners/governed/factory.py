"""The runners of kinds ``turn`` and ``job`` built from :class:`Settings` (the kind registry's factories).

docs/architecture.md, section "The modules, in detail" (runners/governed/factory.py).
"""

from __future__ import annotations

import hashlib
from typing import Any

from alma_schedule.errors import ConfigurationError
from alma_schedule.runners.governed.batch import GovernedBatchRunner
from alma_schedule.runners.governed.config import GovernedConfig
from alma_schedule.runners.governed.conversation import GovernedConversationRunner
from alma_schedule.runners.governed.money import HostCaps, Prices
from alma_schedule.runners.governed.protocols import Sink
from alma_schedule.runners.governed.scripted import ScriptedProvider
from alma_schedule.runners.governed.sinks import FileSink, StdoutSink
from alma_schedule.settings import Settings

__all__ = [
    "config_from_settings",
    "job_runner_from_settings",
    "provider_from_settings",
    "sink_from_settings",
    "turn_runner_from_settings",
]

PROVIDERS = ("openai", "scripted")


def provider_from_settings(settings: Settings) -> Any:
    """The provider ``ALMA_PROVIDER`` names (it serves both turns and batches)."""
    name = settings.provider
    if not name:
        raise ConfigurationError(
            "ALMA_PROVIDER is not set: the turn and job kinds need 'openai' ('scripted' only for demos and tests)"
        )
    if name == "scripted":
        return ScriptedProvider(prices=Prices.from_settings(settings))
    if name == "openai":
        from alma_schedule.runners.adapters.openai import OpenAICompatibleProvider

        return OpenAICompatibleProvider.from_settings(settings)
    raise ConfigurationError(f"ALMA_PROVIDER={name!r} is not a provider (one of: {', '.join(PROVIDERS)})")


def sink_from_settings(settings: Settings) -> Sink:
    """The sink ``ALMA_SINK`` names: ``stdout``, ``file:/path`` or ``webhook`` (``ALMA_WEBHOOK_URL``)."""
    spec = settings.sink
    if not spec:
        raise ConfigurationError("ALMA_SINK is not set: 'stdout', 'file:/path' or 'webhook'")
    if spec == "stdout":
        return StdoutSink()
    if spec.startswith("file:"):
        return FileSink(spec[len("file:") :])
    if spec == "webhook":
        from alma_schedule.runners.adapters.webhook import WebhookSink

        return WebhookSink.from_settings(settings)
    raise ConfigurationError(f"ALMA_SINK={spec!r} is not a sink ('stdout', 'file:/path' or 'webhook')")


def _revision_inputs(settings: Settings) -> dict[str, Any]:
    """What a routine's ``config_revision`` must cover: the provider account and the sink (hashed
    where they could carry credentials in a URL)."""

    def digest(text: str | None) -> str | None:
        return None if text is None else hashlib.sha256(text.encode()).hexdigest()[:16]

    inputs: dict[str, Any] = {"provider": settings.provider, "sink": settings.sink}
    if settings.provider == "openai":
        inputs["account"] = digest(settings.openai_base_url)
        inputs["model"] = settings.openai_model
    if settings.sink == "webhook":
        inputs["webhook"] = digest(settings.webhook_url)
    return inputs


def config_from_settings(settings: Settings) -> GovernedConfig:
    """Both runners' configuration: the sink ``ALMA_SINK`` names, prices, host caps, retention, model."""
    return GovernedConfig(
        sinks={"default": sink_from_settings(settings)},
        prices=Prices.from_settings(settings),
        host=HostCaps.from_settings(settings),
        result_retention=settings.result_retention,
        config_revision=_revision_inputs(settings),
        model=settings.openai_model if settings.provider == "openai" else None,
    )


def turn_runner_from_settings(settings: Settings) -> GovernedConversationRunner:
    """The runner of kind ``turn``."""
    provider = provider_from_settings(settings)
    return GovernedConversationRunner(provider=provider, config=config_from_settings(settings))


def job_runner_from_settings(settings: Settings) -> GovernedBatchRunner:
    """The runner of kind ``job`` (deadline ``ALMA_SUBMISSION_DEADLINE``, first poll ``ALMA_POLL_FIRST``)."""
    provider = provider_from_settings(settings)
    return GovernedBatchRunner(
        provider=provider,
        submission_deadline=settings.submission_deadline,
        poll_first=settings.poll_first,
        config=config_from_settings(settings),
    )
