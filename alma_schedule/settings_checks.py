"""The checks :func:`~alma_schedule.settings.load_settings` makes of a whole set of settings, each
refusal one line naming the setting (``Settings.__post_init__`` calls :func:`checked_tick_expires`
itself, also when built in code). It reads the values through :class:`CheckedSettings`, so it
imports nothing of :mod:`alma_schedule.settings`."""

from __future__ import annotations

import importlib.util
from datetime import timedelta
from typing import Protocol

from alma_schedule.errors import ConfigurationError
from alma_schedule.model.secret import Secret
from alma_schedule.setting_values import (
    check_dashboard,
    check_database_schema,
    check_http,
    derived_tick_expires,
    env_name,
)
from alma_schedule.setting_values import seconds_text as _secs


class CheckedSettings(Protocol):
    """What :func:`check_settings` reads by name (and, by ``getattr``, the counts and durations it lists)."""

    @property
    def database_schema(self) -> str: ...

    @property
    def tick_queue(self) -> str: ...

    @property
    def run_queue(self) -> str: ...

    @property
    def collect_queue(self) -> str: ...

    @property
    def dead_queue(self) -> str: ...

    @property
    def tick_period(self) -> timedelta: ...

    @property
    def hint_poll(self) -> timedelta: ...

    @property
    def min_wake_interval(self) -> timedelta: ...

    @property
    def max_nesting_depth(self) -> int: ...

    @property
    def trusted_proxies(self) -> tuple[str, ...]: ...

    @property
    def dashboard_user(self) -> str | None: ...

    @property
    def dashboard_password_hash(self) -> Secret | None: ...

    @property
    def dashboard_scopes(self) -> str | None: ...

    @property
    def dashboard_origin(self) -> str | None: ...

    @property
    def metrics_bind(self) -> str: ...


def check_settings(s: CheckedSettings) -> None:
    """Refuse, in one line naming the setting, what ``Settings`` itself does not check."""
    # tick_period / tick_expires are checked by Settings itself (also when built in code)
    check_database_schema(s.database_schema)
    check_dashboard(s.dashboard_scopes, s.dashboard_user, s.dashboard_password_hash)
    check_http(s.trusted_proxies, s.dashboard_origin, s.metrics_bind)
    for name in ("claim_limit", "tick_max_batches", "tick_claim_workers", "run_batch_size"):
        if getattr(s, name) < 1:
            raise ConfigurationError(f"{env_name(name)} must be at least 1")
    _check_limits(s)
    for name in (
        "resend_first",
        "poll_first",
        "run_time_limit",
        "defer_first",
        "one_shot_window",
        "tick_time_limit",
        "collect_time_limit",
        "run_batch_budget",
        "hint_poll",
    ):
        if getattr(s, name) <= timedelta(0):
            raise ConfigurationError(f"{env_name(name)} must be positive")
    if s.min_wake_interval < timedelta(0):
        raise ConfigurationError(f"{env_name('min_wake_interval')} must not be negative")
    if s.hint_poll > s.tick_period:
        raise ConfigurationError(
            f"{env_name('hint_poll')} ({_secs(s.hint_poll)}) must not exceed {env_name('tick_period')} "
            f"({_secs(s.tick_period)}): the clock reads the hint at least once per heartbeat"
        )
    _check_dead_queue(s)
    if getattr(s, "alert_webhook", None) and importlib.util.find_spec("httpx") is None:
        raise ConfigurationError(
            f"{env_name('alert_webhook')} needs `pip install alma-schedule[openai]` (its posts use httpx)"
        )


def _check_dead_queue(s: CheckedSettings) -> None:
    """The dead-letter queue is none of the queues our workers consume (a refusal would loop)."""
    ours = {s.tick_queue: "tick_queue", s.run_queue: "run_queue", s.collect_queue: "collect_queue"}
    if not s.dead_queue.strip():
        raise ConfigurationError(f"{env_name('dead_queue')} must name a queue")
    if s.dead_queue in ours:
        raise ConfigurationError(
            f"{env_name('dead_queue')}={s.dead_queue!r} is also {env_name(ours[s.dead_queue])}: "
            "refused messages must go to a queue no worker of ours consumes"
        )


def _check_limits(s: CheckedSettings) -> None:
    """The registration limits: each at least 1; the nesting depth at most the
    stores' own :data:`~alma_schedule.stores.validation.MAX_JSON_DEPTH` (64)."""
    for name in ("max_definition_bytes", "max_schedule_bytes", "max_nesting_depth", "max_cap_usd"):
        if getattr(s, name) < 1:
            raise ConfigurationError(f"{env_name(name)} must be at least 1")
    if s.max_nesting_depth > 64:
        raise ConfigurationError(f"{env_name('max_nesting_depth')} must be at most 64 (the stores' own limit)")


#: The shortest retention of history a setting may name: a shorter one would delete what an operator
#: is still reading (issue 50).
MIN_RETENTION = timedelta(days=1)


def check_retention(name: str, value: timedelta | None) -> None:
    """A retention of history (``run_retention``): unset (kept forever) or at least
    :data:`MIN_RETENTION`; one line naming the setting (``Settings.__post_init__`` calls it)."""
    if value is not None and value < MIN_RETENTION:
        raise ConfigurationError(f"{env_name(name)} ({_secs(value)}) must be at least 1d (86400s), or unset")


def checked_tick_expires(period: timedelta, expires: timedelta | None) -> timedelta:
    """``tick_expires`` of a settings object: ``expires``, or None derived from ``period``; one line
    naming both settings when they do not fit."""
    if period <= timedelta(0):
        raise ConfigurationError("ALMA_TICK_PERIOD must be positive")
    if expires is None:
        expires = derived_tick_expires(period)
        if expires <= timedelta(0):
            raise ConfigurationError(
                f"ALMA_TICK_PERIOD ({_secs(period)}) must be longer than 1s: tick messages "
                "expire max(1s, period/12) before the next one (or set ALMA_TICK_EXPIRES)"
            )
        return expires
    if expires <= timedelta(0):
        raise ConfigurationError(f"ALMA_TICK_EXPIRES ({_secs(expires)}) must be positive")
    if expires >= period:
        raise ConfigurationError(
            f"ALMA_TICK_EXPIRES ({_secs(expires)}) must be shorter than ALMA_TICK_PERIOD "
            f"({_secs(period)}); leave ALMA_TICK_EXPIRES unset to derive it"
        )
    return expires
