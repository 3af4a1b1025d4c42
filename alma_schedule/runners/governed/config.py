"""The governed runners' configuration: one frozen :class:`GovernedConfig`, checked when built.

Both runners, their ``create_governed_*_runner`` functions and the settings' factories build it;
docs/architecture.md, section "Where each step lives" (runners/).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from alma_schedule.errors import ConfigurationError
from alma_schedule.model import Routine, RunKey
from alma_schedule.runners.governed.delivery import BackgroundErrorHook, CapCrossedHook, check_sinks
from alma_schedule.runners.governed.money import HostCaps, MoneyPlan, Prices
from alma_schedule.runners.governed.protocols import Sink

#: ``build_request(routine, key, plan) -> prompt text``: loads context lazily, after every reservation.
PromptBuilder = Callable[[Routine, RunKey, MoneyPlan], str]

__all__ = ["GovernedConfig", "PromptBuilder"]


@dataclass(frozen=True, slots=True)
class GovernedConfig:
    """What a governed runner is configured with; a single sink becomes the ``default`` one.

    ``sinks`` by name (a routine picks one with ``definition["sink"]``); ``prices`` and ``host``
    (default: none); ``config_revision``: what a routine's revision covers beyond its definition;
    ``build_prompt`` loads context after every reservation; the hooks receive raw errors and alerts.
    """

    sinks: Mapping[str, Sink]
    prices: Prices = field(default_factory=Prices)
    host: HostCaps = field(default_factory=HostCaps)
    result_retention: timedelta | None = None
    config_revision: Mapping[str, Any] = field(default_factory=dict)
    on_background_error: BackgroundErrorHook | None = None
    on_cap_crossed: CapCrossedHook | None = None
    build_prompt: PromptBuilder | None = None
    model: str | None = None

    def __post_init__(self) -> None:
        sinks: Any = self.sinks  # a single sink (as the create functions take it) is the default one
        object.__setattr__(self, "sinks", check_sinks(sinks if isinstance(sinks, Mapping) else {"default": sinks}))
        object.__setattr__(self, "prices", self.prices or Prices())
        object.__setattr__(self, "host", self.host or HostCaps())
        object.__setattr__(self, "config_revision", dict(self.config_revision or {}))
        if self.result_retention is not None and self.result_retention < timedelta(0):
            raise ConfigurationError("result_retention must not be negative")
        for name in ("per_run_micros", "routine_daily_micros", "org_daily_micros"):
            if getattr(self.host, name) < 0:
                raise ConfigurationError(f"host cap {name} must not be negative")
