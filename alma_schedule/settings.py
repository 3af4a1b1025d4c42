"""Settings: one frozen object, read from flags and ``ALMA_*`` environment variables in ONE place.

Every field has a default, a one-line doc (``metadata["doc"]``) and an environment variable
``ALMA_<NAME>``. :func:`load_settings` is the only reader of the environment: an unknown
``ALMA_*`` variable or a malformed value is a :class:`ConfigurationError` naming it. Secret fields
are :class:`Secret` values whose ``repr`` never shows the text.

Durations accept seconds (``90``) or ``90s``, ``15m``, ``2h``, ``1d``, ``1h30m``.
"""

from __future__ import annotations

import dataclasses
import hmac
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from alma_schedule.errors import ConfigurationError
from alma_schedule.model.time import system_time

ENV_PREFIX = "ALMA_"
#: The store's own namespace in a shared database: a PostgreSQL schema, or a table prefix on SQLite.
DEFAULT_DATABASE_SCHEMA = "alma"
_SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def check_database_schema(value: str, label: str = "ALMA_DATABASE_SCHEMA") -> str:
    """``value`` if it is a plain lower-case identifier (``^[a-z_][a-z0-9_]{0,62}$``, not ``pg_*``,
    which PostgreSQL reserves), else a one-line :class:`ConfigurationError` naming ``label``."""
    if not isinstance(value, str) or not _SCHEMA_NAME.match(value) or value.startswith("pg_"):
        raise ConfigurationError(
            f"{label}: {value!r} is not a schema name (lower-case letters, digits and _, "
            "at most 63, not starting with a digit or pg_)"
        )
    return value


class Secret:
    """A secret string: hidden in ``repr``/``str``, compared in constant time."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def matches(self, candidate: str | bytes) -> bool:
        if isinstance(candidate, str):
            candidate = candidate.encode()
        return hmac.compare_digest(self._value.encode(), candidate)

    def __repr__(self) -> str:
        return "Secret('********')"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and hmac.compare_digest(self._value.encode(), other._value.encode())

    def __hash__(self) -> int:
        return hash(("Secret", len(self._value)))

    def __bool__(self) -> bool:
        return bool(self._value)


_DURATION = re.compile(r"^(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+(?:\.\d+)?)s)?$")


def parse_duration(name: str, text: str | float | int | timedelta) -> timedelta:
    """Parse ``90``, ``90s``, ``15m``, ``2h``, ``1d``, ``1h30m`` into a timedelta (> 0 not required)."""
    if isinstance(text, timedelta):
        return text
    if isinstance(text, bool):
        raise ConfigurationError(f"{name}: expected a duration, got {text!r}")
    if isinstance(text, (int, float)):
        return timedelta(seconds=text)
    raw = text.strip().lower()
    try:
        return timedelta(seconds=float(raw))
    except ValueError:
        pass
    m = _DURATION.match(raw)
    if not raw or not m or not any(m.groups()):
        raise ConfigurationError(f"{name}: {text!r} is not a duration (use e.g. 90s, 15m, 2h, 1d)")
    d, h, mi, s = m.groups()
    return timedelta(days=int(d or 0), hours=int(h or 0), minutes=int(mi or 0), seconds=float(s or 0))


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
    # --- the clock and the tick
    tick_period: timedelta = _f(timedelta(seconds=60), "How often the external clock sends a tick.", "duration")
    tick_expires: timedelta = _f(
        timedelta(seconds=55), "Tick messages expire after this (below the tick period).", "duration"
    )
    clock_tolerance: timedelta = _f(
        timedelta(seconds=2), "How far a caller's `now` may lead the worker clock.", "duration"
    )
    claim_limit: int = _f(1000, "Fires claimed per claim_due batch (a tick loops over batches).", "int")
    tick_max_batches: int = _f(100, "Upper bound of claim_due batches in one tick.", "int")
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
    result_retention: timedelta = _f(timedelta(days=30), "Result text is erased this long after a run.", "duration")
    heartbeat_max_age: timedelta = _f(
        timedelta(minutes=5), "GET /healthz fails when no tick ran for this long.", "duration"
    )
    # --- money (integer micro-USD; 0 = no cap)
    cap_per_run_micros: int = _f(0, "Host hard bound per run, micro-USD (0 = none).", "int")
    ceiling_routine_daily_micros: int = _f(0, "Host daily ceiling per routine, micro-USD (0 = none).", "int")
    ceiling_org_daily_micros: int = _f(0, "Host daily ceiling per org, micro-USD (0 = none).", "int")
    money_day_tz: str = _f("UTC", "Time zone whose calendar day the ceilings count in.")
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
    # --- HTTP tick endpoint
    http_secret: Secret | None = _f(None, "Shared secret of POST /tick (X-Alma-Secret header).", "secret")
    http_host: str = _f("127.0.0.1", "Bind address of serve-http.")
    http_port: int = _f(8080, "Port of serve-http.", "int")
    http_max_body: int = _f(4096, "Largest request body serve-http accepts, bytes.", "int")
    # --- Celery app
    celery_app: str | None = _f(None, "MODULE:APP of the fleet app for task routines (import path).")
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
    clock: Callable[[], datetime] = field(
        default=system_time,
        compare=False,
        metadata={
            "doc": "The time source (code only: tests and the demo pass a SettableTime).",
            "kind": "code",
        },
    )

    def now(self) -> datetime:
        return self.clock()

    def replace(self, **changes: Any) -> Settings:
        return dataclasses.replace(self, **changes)

    def describe(self) -> dict[str, Any]:
        """Settings as plain values, secrets masked (for ``--debug`` and docs)."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            if f.metadata.get("kind") == "code":
                continue
            v = getattr(self, f.name)
            if isinstance(v, Secret):
                v = "********"
            elif isinstance(v, timedelta):
                v = f"{v.total_seconds():g}s"
            out[f.name] = v
        return out


def __getattr__(name: str) -> Any:
    from alma_schedule.deprecation import resolve_alias

    return resolve_alias(__name__, name, {"system_clock": ("alma_schedule.model.time", "system_time")})


FIELDS: Mapping[str, dataclasses.Field[Any]] = {f.name: f for f in dataclasses.fields(Settings)}


def env_name(name: str) -> str:
    return ENV_PREFIX + name.upper()


def _convert(name: str, raw: Any) -> Any:
    f = FIELDS[name]
    kind = f.metadata.get("kind", "")
    label = env_name(name)
    if raw is None or (isinstance(raw, str) and raw == "" and f.default is None):
        return None
    if kind == "duration":
        return parse_duration(label, raw)
    if kind == "int":
        if isinstance(raw, bool):
            raise ConfigurationError(f"{label}: expected an integer, got {raw!r}")
        try:
            return int(raw)
        except (TypeError, ValueError):
            raise ConfigurationError(f"{label}: expected an integer, got {raw!r}") from None
    if kind == "bool":
        if isinstance(raw, bool):
            return raw
        text = str(raw).strip().lower()
        if text in {"1", "true", "yes", "on"}:
            return True
        if text in {"0", "false", "no", "off"}:
            return False
        raise ConfigurationError(f"{label}: expected true/false, got {raw!r}")
    if kind == "secret":
        return raw if isinstance(raw, Secret) else Secret(str(raw))
    if kind == "code":
        if not callable(raw):
            raise ConfigurationError(f"{name}: expected a callable")
        return raw
    if not isinstance(raw, str):
        raise ConfigurationError(f"{label}: expected text, got {type(raw).__name__}")
    return raw


def load_settings(
    overrides: Mapping[str, Any] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
) -> Settings:
    """Build :class:`Settings` from ``ALMA_*`` variables, then ``overrides`` (flags) on top.

    ``overrides`` whose value is None are ignored (an unset flag). Unknown names are an error.
    """
    env = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    for key, raw in env.items():
        if not key.startswith(ENV_PREFIX):
            continue
        name = key[len(ENV_PREFIX) :].lower()
        if name not in FIELDS or FIELDS[name].metadata.get("kind") == "code":
            raise ConfigurationError(f"unknown setting {key} (see `alma-schedule --help` for the list)")
        values[name] = _convert(name, raw)
    for name, raw in (overrides or {}).items():
        if raw is None:
            continue
        if name not in FIELDS:
            raise ConfigurationError(f"unknown setting {name!r}")
        values[name] = _convert(name, raw)
    settings = Settings(**values)
    _check(settings)
    return settings


def _check(s: Settings) -> None:
    check_database_schema(s.database_schema)
    if s.tick_expires >= s.tick_period:
        raise ConfigurationError("ALMA_TICK_EXPIRES must be shorter than ALMA_TICK_PERIOD")
    for name in ("claim_limit", "tick_max_batches", "run_batch_size"):
        if getattr(s, name) < 1:
            raise ConfigurationError(f"{env_name(name)} must be at least 1")
    for name in (
        "resend_first", "poll_first", "run_time_limit", "defer_first", "one_shot_window",
        "tick_time_limit", "collect_time_limit", "run_batch_budget",
    ):
        if getattr(s, name) <= timedelta(0):
            raise ConfigurationError(f"{env_name(name)} must be positive")


@dataclass(frozen=True, slots=True)
class Timers:
    """The timer family the engine hands to the store (the store holds no policy of its own)."""

    resend_first: timedelta
    resend_max: timedelta
    poll_first: timedelta
    poll_max: timedelta
    defer_first: timedelta
    defer_max: timedelta
    one_shot_window: timedelta
    run_time_limit: timedelta
    failure_threshold: int
    result_retention: timedelta

    @classmethod
    def from_settings(cls, s: Settings) -> Timers:
        return cls(
            resend_first=s.resend_first,
            resend_max=s.resend_max,
            poll_first=s.poll_first,
            poll_max=s.poll_max,
            defer_first=s.defer_first,
            defer_max=s.defer_max,
            one_shot_window=s.one_shot_window,
            run_time_limit=s.run_time_limit,
            failure_threshold=s.failure_threshold,
            result_retention=s.result_retention,
        )

    @staticmethod
    def backoff(first: timedelta, cap: timedelta, attempts: int) -> timedelta:
        """``first * 2**attempts``, capped at ``cap`` (attempts counts sends already made)."""
        if attempts >= 30:
            return cap
        grown: timedelta = first * (2**attempts)
        return min(grown, cap)
