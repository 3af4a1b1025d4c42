"""Settings: one frozen object, read from flags, ``ALMA_*`` variables and a Celery app's ``alma_*`` keys.

docs/architecture.md, section "The modules, in detail" (settings.py).
"""

from __future__ import annotations

import dataclasses
import difflib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from alma_schedule.errors import ConfigurationError
from alma_schedule.model.secret import Secret as Secret  # re-exported: its home since 0.1.0
from alma_schedule.model.time import system_time
from alma_schedule.setting_values import DEFAULT_DATABASE_SCHEMA as DEFAULT_DATABASE_SCHEMA
from alma_schedule.setting_values import ENV_PREFIX as ENV_PREFIX
from alma_schedule.setting_values import check_database_schema as check_database_schema
from alma_schedule.setting_values import convert_value, shown_value
from alma_schedule.setting_values import derived_tick_expires as derived_tick_expires
from alma_schedule.setting_values import env_name as env_name
from alma_schedule.setting_values import is_embedded_store as is_embedded_store
from alma_schedule.setting_values import parse_duration as parse_duration
from alma_schedule.setting_values import refuse_lost_sends as refuse_lost_sends
from alma_schedule.setting_values import seconds_text as _secs
from alma_schedule.settings_checks import check_retention, check_settings, checked_tick_expires
from alma_schedule.timers import Timers as Timers

CONF_PREFIX = "alma_"
#: Where the list of every setting is printed (the message of an unknown one points there).
LISTED_BY = "`alma-schedule settings` lists them all"


def _f(default: Any, doc: str, kind: str = "", **kw: Any) -> Any:
    return field(default=default, metadata={"doc": doc, "kind": kind, **kw})


@dataclass(frozen=True, slots=True)
class Settings:
    """Every setting of alma-schedule. Construct with :func:`load_settings` (or directly in code)."""

    # --- where things live
    database_url: str = _f(
        "sqlite:///alma-schedule.sqlite3",
        "Routine and run store: postgresql+psycopg://... in production, sqlite:///path embedded.",
        "url",
    )
    database_schema: str = _f(
        DEFAULT_DATABASE_SCHEMA,
        "The store's own PostgreSQL schema (SQLite: table prefix) in a shared database; with its own version table.",
    )
    broker_url: str = _f("memory://", "Celery broker (redis://host:6379/0 in production).", "url")
    result_backend: str | None = _f(None, "Celery result backend (needed for tracked task routines).", "url")
    tick_queue: str = _f("alma.tick", "Queue of tick messages (serve it with its own worker).")
    run_queue: str = _f("alma.run", "Queue of run messages.")
    collect_queue: str = _f("alma.collect", "Queue of collect messages.")
    dead_queue: str = _f(
        "alma.dead", "Where a refused (poison) message of our queues is republished (Redis has no dead-letter queue)."
    )
    # --- the clock and the tick
    tick_period: timedelta = _f(
        timedelta(seconds=60),
        "The clock's heartbeat: it ticks at least this often (it wakes at the next due instant).",
        "duration",
    )
    hint_poll: timedelta = _f(
        timedelta(seconds=1),
        "How often a clock re-reads the wake-up hint while it sleeps (sees new routines).",
        "duration",
    )
    min_wake_interval: timedelta = _f(
        timedelta(milliseconds=200),
        "Least time between two ticks a clock sends for the hint (a burst costs one tick).",
        "duration",
    )
    tick_expires: timedelta = _f(
        None,
        "Tick messages expire after this (below the tick period); unset: period - max(1s, period/12).",
        "duration",
        default_text="55s at 60s",
    )
    clock_tolerance: timedelta = _f(
        timedelta(seconds=2), "How far a caller's `now` may lead the worker clock.", "duration"
    )
    claim_limit: int = _f(1000, "Fires claimed per claim_due batch (a tick loops over batches).", "int")
    tick_max_batches: int = _f(100, "Upper bound of claim_due batches in one tick.", "int")
    tick_claim_workers: int = _f(
        2, "claim_due batches a tick runs at once past a full first batch (PostgreSQL; SQLite: 1).", "int"
    )
    tick_gc_pause: bool = _f(
        True, "Pause Python's cyclic garbage collector while a tick claims and sends (turned back on after).", "bool"
    )
    # --- fire eligibility and re-sends
    one_shot_window: timedelta = _f(
        timedelta(hours=1), "How long an `at` or manual run stays eligible (its messages expire then).", "duration"
    )
    max_catch_up: timedelta | None = _f(
        None, "Optional cap: a fire older than this is recorded skipped(missed) instead of run.", "duration"
    )
    resend_first: timedelta = _f(timedelta(minutes=2), "First re-send of an unstarted run after this.", "duration")
    resend_max: timedelta = _f(timedelta(minutes=30), "Re-send back-off doubles up to this.", "duration")
    resend_pause_depth: int = _f(10_000, "Re-sends pause while the run queue is deeper than this.", "int")
    poll_first: timedelta = _f(timedelta(seconds=30), "First poll of a submitted job after this.", "duration")
    poll_max: timedelta = _f(timedelta(minutes=10), "Poll back-off doubles up to this.", "duration")
    submission_deadline: timedelta = _f(
        timedelta(hours=24), "Default deadline of a submitted background job.", "duration"
    )
    run_time_limit: timedelta = _f(
        timedelta(minutes=5), "Soft time limit of a run task (hard limit = soft + 30 s).", "duration"
    )
    defer_first: timedelta = _f(timedelta(minutes=1), "Back-off of a routine that cannot be planned.", "duration")
    defer_max: timedelta = _f(timedelta(hours=1), "Planning back-off doubles up to this.", "duration")
    failure_threshold: int = _f(5, "Consecutive failures that latch an automatic pause (0 = never).", "int")
    streak_counts_refused: bool = _f(
        True, "refused(not_admitted) and refused(routing_unavailable) count for the failure streak.", "bool"
    )
    result_retention: timedelta = _f(timedelta(days=30), "Result text is erased this long after a run.", "duration")
    run_retention: timedelta | None = _f(
        None, "Terminal runs finished this long ago are deleted by the tick, claim_limit a tick (>= 1d).", "duration"
    )
    event_retention: timedelta | None = _f(
        None, "Audit events older than this are deleted by the tick, claim_limit a tick (>= 1d).", "duration"
    )
    heartbeat_max_age: timedelta = _f(
        timedelta(minutes=5), "GET /healthz fails when no tick ran for this long.", "duration"
    )
    # --- money (integer micro-USD; 0 = no cap)
    cap_per_run_micros: int = _f(0, "Host hard bound per run, micro-USD (0 = none).", "int")
    ceiling_routine_daily_micros: int = _f(0, "Host daily ceiling per routine, micro-USD (0 = none).", "int")
    ceiling_org_daily_micros: int = _f(0, "Host daily ceiling per org, micro-USD (0 = none).", "int")
    money_day_tz: str = _f("UTC", "Time zone whose calendar day the ceilings count in.")
    # --- limits of what registration accepts (a stored row over one keeps running; `routines list` flags it)
    max_definition_bytes: int = _f(65_536, "Largest definition registration accepts, bytes of canonical JSON.", "int")
    max_schedule_bytes: int = _f(4_096, "Largest schedule registration accepts, bytes of canonical JSON.", "int")
    max_nesting_depth: int = _f(32, "Deepest nesting of a definition or schedule registration accepts (<= 64).", "int")
    max_cap_usd: int = _f(1_000_000, "Largest money cap a routine's budget may name, USD.", "int")
    # --- providers and sinks
    provider: str | None = _f(None, "Provider of turn/job routines: 'openai' or (demo only) 'scripted'.")
    openai_base_url: str = _f("https://api.openai.com", "Base URL of the OpenAI-compatible API.", "url")
    openai_api_key: Secret | None = _f(None, "API key of the OpenAI-compatible provider.", "secret")
    openai_model: str = _f("gpt-4o-mini", "Model of the OpenAI-compatible provider.")
    openai_timeout: timedelta = _f(timedelta(seconds=60), "HTTP timeout of provider calls.", "duration")
    openai_max_output_tokens: int = _f(
        16_384, "Largest max_tokens the model accepts (the cost bound is capped by it).", "int"
    )
    price_input_per_mtok_micros: int = _f(150_000, "Price per million input tokens, micro-USD.", "int")
    price_output_per_mtok_micros: int = _f(600_000, "Price per million output tokens, micro-USD.", "int")
    sink: str | None = _f(None, "Default sink: 'stdout', 'file:/path' or 'webhook'.")
    webhook_url: str | None = _f(None, "URL of the webhook sink.", "url")
    webhook_secret: Secret | None = _f(None, "HMAC-SHA256 secret of the webhook sink.", "secret")
    webhook_timeout: timedelta = _f(timedelta(seconds=10), "HTTP timeout of webhook deliveries.", "duration")
    alert_webhook: str | None = _f(None, 'URL the "did not run" alarm posts each overdue fire to.', "url")
    # --- HTTP tick endpoint
    http_secret: Secret | None = _f(None, "Shared secret of POST /tick (X-Alma-Secret header).", "secret")
    http_host: str = _f("127.0.0.1", "Bind address of serve-http.")
    http_port: int = _f(8080, "Port of serve-http.", "int")
    http_max_body: int = _f(4096, "Largest request body serve-http accepts, bytes.", "int")
    trusted_proxies: tuple[str, ...] = _f(
        (),
        "Addresses or networks (comma-separated) of the reverse proxies whose X-Forwarded-For names the client "
        "serve-http throttles; unset: the peer address.",
        "list",
        default_text="(none)",
    )
    # --- the dashboard of serve-http
    dashboard_user: str | None = _f(None, "User name of the dashboard's HTTP Basic auth.")
    dashboard_password_hash: Secret | None = _f(
        None, "scrypt hash of the dashboard password (`alma-schedule hash-password` prints one).", "secret"
    )
    dashboard_scopes: str | None = _f(
        None, "Scopes the dashboard shows: '*' (the whole fleet) or ORG/UID,ORG/* (unset: the dashboard is off)."
    )
    dashboard_read_only: bool = _f(True, "The dashboard refuses every action (pause, record, ...).", "bool")
    dashboard_origin: str | None = _f(
        None,
        "The dashboard's own origin (https://ops.example.com) behind a reverse proxy: a write whose Origin or "
        "Referer names another is refused; unset: the request's own scheme and Host.",
        "url",
    )
    metrics_token: Secret | None = _f(
        None, "Bearer token of serve-http's GET /metrics (besides the dashboard's).", "secret"
    )
    metrics_port: int = _f(
        0, "Port of the worker exporter (/metrics of a worker host serving our queues; 0 = off).", "int"
    )
    metrics_bind: str = _f("127.0.0.1", "Address the worker exporter listens on (0.0.0.0: every interface).")
    # --- Celery app
    celery_app: str | None = _f(None, "MODULE:APP of the fleet app for task routines (import path).")
    beat_sync: bool = _f(True, "install(app, beat_clock=True): beat's start syncs beat_schedule into routines.", "bool")
    beat_sync_scope: str | None = _f(None, "ORG/UID of the synced routines; unset: beat/<app main name>.")
    beat_sync_prune: str = _f("disable", "An entry removed from beat_schedule: disable its routine, or delete it.")
    task_allow: tuple[str, ...] = _f(
        (),
        "Globs (comma-separated) of the fleet tasks task routines may send; unset: every task the app registers "
        "except alma_schedule.* and celery.*, which are never allowed.",
        "list",
        default_text="(every fleet task)",
    )
    queue_allow: tuple[str, ...] = _f(
        (),
        "Globs (comma-separated) of the queues task routines may send to; unset: any queue except alma.*, ours, "
        "celeryev.* and *.pidbox, which are never allowed.",
        "list",
        default_text="(any but ours)",
    )
    task_events: bool = _f(True, "Send task events (Flower) from the ready app.", "bool")
    tick_time_limit: timedelta = _f(
        timedelta(minutes=5), "Soft time limit of a tick task (hard limit = soft + 30 s).", "duration"
    )
    collect_time_limit: timedelta = _f(
        timedelta(minutes=5), "Soft time limit of a collect task (hard limit = soft + 30 s).", "duration"
    )
    run_batch_size: int = _f(
        20, "A dispatch of more fires than this packs them this many to a run_many message (1 = never).", "int"
    )
    run_batch_budget: timedelta = _f(
        timedelta(seconds=2), "A run_many message re-sends the fires it has not started after this long.", "duration"
    )
    # --- process
    log_level: str = _f("INFO", "Log level.")
    time_source: Callable[[], datetime] = field(
        default=system_time,
        compare=False,
        metadata={
            "doc": "The time source (code only: tests and the demo pass a SettableTime; ``clock=`` works too).",
            "kind": "code",
        },
    )

    def __post_init__(self) -> None:
        object.__setattr__(self, "tick_expires", checked_tick_expires(self.tick_period, self.tick_expires))
        check_retention("run_retention", self.run_retention)
        check_retention("event_retention", self.event_retention)

    @property
    def clock(self) -> Callable[[], datetime]:
        """The time source (:attr:`time_source`) under its 0.1.0 name, kept."""
        return self.time_source

    def now(self) -> datetime:
        return self.time_source()

    def replace(self, **changes: Any) -> Settings:
        """A copy with ``changes``; a derived ``tick_expires`` is derived again from a new period."""
        if (
            "tick_period" in changes
            and "tick_expires" not in changes
            and self.tick_expires == derived_tick_expires(self.tick_period)
        ):
            changes["tick_expires"] = None
        if "clock" in changes:
            changes["time_source"] = changes.pop("clock")
        return dataclasses.replace(self, **changes)

    def __repr__(self) -> str:  # dataclass keeps this one: secrets and URL passwords masked
        shown = (f"{f.name}={shown_value(f.metadata.get('kind', ''), getattr(self, f.name))!r}" for f in _FIELDS)
        return f"Settings({', '.join(shown)})"

    def describe(self) -> dict[str, Any]:
        """Settings as plain values, secrets and URL passwords masked (for ``--debug`` and docs)."""
        out: dict[str, Any] = {}
        for f in _FIELDS:
            if f.metadata.get("kind") == "code":
                continue
            v = getattr(self, f.name)
            out[f.name] = _secs(v) if isinstance(v, timedelta) else shown_value(f.metadata.get("kind", ""), v)
        return out


_dataclass_init = Settings.__init__


def _init(self: Settings, *args: Any, clock: Callable[[], datetime] | None = None, **kwargs: Any) -> None:
    """The dataclass's ``__init__``, also taking the time source under its 0.1.0 name ``clock``."""
    if clock is not None:
        if "time_source" in kwargs:
            raise TypeError("Settings() takes the time source once: time_source or clock, not both")
        kwargs["time_source"] = clock
    _dataclass_init(self, *args, **kwargs)


Settings.__init__ = _init  # type: ignore[method-assign]


def __getattr__(name: str) -> Any:
    from alma_schedule.deprecation import resolve_alias

    return resolve_alias(__name__, name, {"system_clock": ("alma_schedule.model.time", "system_time")})


_FIELDS = dataclasses.fields(Settings)
FIELDS: Mapping[str, dataclasses.Field[Any]] = {f.name: f for f in _FIELDS}


def conf_name(name: str) -> str:
    return CONF_PREFIX + name


def _convert(name: str, raw: Any, label: str | None = None) -> Any:
    f = FIELDS[name]
    return convert_value(name, str(f.metadata.get("kind", "")), f.default, raw, label or env_name(name))


def _known(name: str) -> bool:
    return name in FIELDS and FIELDS[name].metadata.get("kind") != "code"


def _unknown(label: str, name: str, spell: Callable[[str], str], where: str) -> ConfigurationError:
    known = [n for n in FIELDS if _known(n)]
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    hint = f" (did you mean {spell(close[0])}?)" if close else ""
    return ConfigurationError(f"unknown setting {label}{where}{hint}; {LISTED_BY}")


def _conf_items(conf: Mapping[str, Any] | None) -> list[tuple[str, Any]]:
    """The ``alma_*`` keys of a Celery app's configuration (any case), as ``(key, value)``."""
    if conf is None:
        return []
    return [(str(k), conf[k]) for k in list(conf.keys()) if str(k).lower().startswith(CONF_PREFIX)]


def peek(name: str, *, conf: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None) -> Any:
    """The raw value of one setting (``ALMA_<NAME>``, else the app's ``alma_<name>``, else None),
    validating NOTHING: for code that runs in processes that do not run ours (routes at install)."""
    env = os.environ if environ is None else environ
    if env_name(name) in env:
        return env[env_name(name)]
    for key, value in _conf_items(conf):
        if key.lower() == conf_name(name):
            return value
    return None


def queue_names(*, conf: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``tick_queue``, ``run_queue`` and ``collect_queue`` read by :func:`peek` (defaults when unset
    or not text); never raises."""
    out: dict[str, str] = {}
    for name in ("tick_queue", "run_queue", "collect_queue"):
        raw = peek(name, conf=conf, environ=environ)
        out[name] = raw if isinstance(raw, str) and raw.strip() else str(FIELDS[name].default)
    return out


def load_settings(
    overrides: Mapping[str, Any] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    conf: Mapping[str, Any] | None = None,
) -> Settings:
    """Build :class:`Settings` from a Celery app's ``alma_*`` keys (``conf``, e.g. ``app.conf``), then
    ``ALMA_*`` variables over them, then ``overrides`` (flags) on top; validate the result.

    ``overrides`` whose value is None are ignored (an unset flag). Unknown names are an error.
    """
    env = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    for key, raw in _conf_items(conf):
        name = key[len(CONF_PREFIX) :].lower()
        if not _known(name):
            raise _unknown(key, name, conf_name, " in the Celery app's configuration")
        values[name] = _convert(name, raw, key)
    for key, raw in env.items():
        if not key.startswith(ENV_PREFIX):
            continue
        name = key[len(ENV_PREFIX) :].lower()
        if not _known(name):
            raise _unknown(key, name, env_name, "")
        values[name] = _convert(name, raw)
    for name, raw in (overrides or {}).items():
        if raw is None:
            continue
        if name not in FIELDS:
            raise ConfigurationError(f"unknown setting {name!r}")
        values[name] = _convert(name, raw)
    settings = Settings(**values)
    check_settings(settings)
    return settings
