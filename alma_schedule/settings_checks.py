"""The checks :func:`~alma_schedule.settings.load_settings` makes of a whole :class:`Settings`, each
refusal one line naming the setting (``Settings.__post_init__`` checks the tick period and expiry
itself, also when built in code)."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from alma_schedule.errors import ConfigurationError
from alma_schedule.setting_values import check_dashboard, check_database_schema
from alma_schedule.setting_values import seconds_text as _secs
from alma_schedule.settings import env_name

if TYPE_CHECKING:
    from alma_schedule.settings import Settings


def check_settings(s: Settings) -> None:
    """Refuse, in one line naming the setting, what ``Settings`` itself does not check."""
    # tick_period / tick_expires are checked by Settings itself (also when built in code)
    check_database_schema(s.database_schema)
    check_dashboard(s.dashboard_scopes, s.dashboard_user, s.dashboard_password_hash)
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


def _check_dead_queue(s: Settings) -> None:
    """The dead-letter queue is none of the queues our workers consume (a refusal would loop)."""
    ours = {s.tick_queue: "tick_queue", s.run_queue: "run_queue", s.collect_queue: "collect_queue"}
    if not s.dead_queue.strip():
        raise ConfigurationError(f"{env_name('dead_queue')} must name a queue")
    if s.dead_queue in ours:
        raise ConfigurationError(
            f"{env_name('dead_queue')}={s.dead_queue!r} is also {env_name(ours[s.dead_queue])}: "
            "refused messages must go to a queue no worker of ours consumes"
        )


def _check_limits(s: Settings) -> None:
    """The registration limits (issue 14, defect 7): each at least 1; the nesting depth at most the
    stores' own :data:`~alma_schedule.stores.validation.MAX_JSON_DEPTH` (64)."""
    for name in ("max_definition_bytes", "max_schedule_bytes", "max_nesting_depth", "max_cap_usd"):
        if getattr(s, name) < 1:
            raise ConfigurationError(f"{env_name(name)} must be at least 1")
    if s.max_nesting_depth > 64:
        raise ConfigurationError(f"{env_name('max_nesting_depth')} must be at most 64 (the stores' own limit)")
