"""Every error alma-schedule raises on purpose. One root, one module.

docs/architecture.md, section "The modules, in detail" (errors.py).
"""

from __future__ import annotations

from typing import Any


class AlmaScheduleError(Exception):
    """Root of every error alma-schedule raises on purpose."""


class ConfigurationError(AlmaScheduleError, ValueError):
    """A setting is unknown, malformed or missing; the message names the setting."""


class ProcessRefused(ConfigurationError, SystemExit):
    """A :class:`ConfigurationError` that also ends the process with its one line (``error: ...``,
    exit status 1) where Celery's own commands would print a traceback for any other exception (a
    worker bootstep, the ready app's ``send_task``). ``except ConfigurationError`` still catches it."""

    def __init__(self, message: str) -> None:
        ConfigurationError.__init__(self, message)
        self.code = f"error: {message}"

    @classmethod
    def of(cls, exc: ConfigurationError) -> ProcessRefused:
        return exc if isinstance(exc, ProcessRefused) else cls(str(exc))


class StoreNotConfigured(ConfigurationError):
    """A command that reads or writes routines or runs found no store configured anywhere (it
    never falls back to a file of its own); the message names every way to configure one."""


#: The optional dependencies of each extra, by top-level module (see pyproject.toml).
EXTRA_MODULES: dict[str, tuple[str, ...]] = {
    "celery": ("celery", "kombu", "redis"),
    "postgres": ("psycopg",),
    "http": ("starlette", "uvicorn"),
    "openai": ("httpx",),
    "calendars": ("holidays",),
}


def missing_extra(exc: ModuleNotFoundError, extra: str, feature: str) -> Exception:
    """What to raise when importing ``feature``'s dependency failed with ``exc``.

    A module of ``extra`` that is not installed: a one-line :class:`ConfigurationError` naming the
    extra (``the Celery face needs `pip install alma-schedule[celery]```). Anything else (a module
    the extra's own packages failed to import: a broken install) is ``exc`` itself, unchanged.
    """
    top = (exc.name or "").partition(".")[0]
    if top in EXTRA_MODULES.get(extra, ()):
        return ConfigurationError(f"{feature} needs `pip install alma-schedule[{extra}]`")
    return exc


class InvalidSchedule(AlmaScheduleError, ValueError):
    """A schedule the core rejects; the message names the field and the reason."""


class InvalidInput(AlmaScheduleError, ValueError):
    """An id, scope, JSON value or argument that cannot be stored as given."""


class RegistrationRefused(AlmaScheduleError, ValueError):
    """``register`` refused a routine a tick could not run; ``reason`` says why."""

    def __init__(self, reason: str, *, blocking_run: Any = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.blocking_run = blocking_run


class NotFound(AlmaScheduleError, LookupError):
    """The routine or run does not exist in this scope.

    Raised through :meth:`of`, so every layer (stores, engine, CLI) words it the same way:
    ``not found: routine acme/alice/briefing`` or ``not found: run acme/alice/briefing/<run id>``.
    """

    @classmethod
    def of(cls, what: str, name: object) -> NotFound:
        """The one wording: ``not found: {what} {name}`` (``what`` is ``routine`` or ``run``)."""
        return cls(f"not found: {what} {name}")


class Refused(AlmaScheduleError):
    """A lever or trigger refused; ``reason`` is ``paused``, ``disabled`` or ``deleted``."""

    def __init__(self, message: str, *, reason: str, record: Any = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.record = record


class Overlap(Refused):
    """A manual trigger while the routine has an active run; ``record`` is the blocking run."""

    def __init__(self, message: str, *, record: Any = None) -> None:
        super().__init__(message, reason="overlap", record=record)


class Finished(Refused):
    """A trigger on a finished routine: ``reason`` is ``not_after`` (the bound it is past)."""

    def __init__(self, message: str, *, reason: str = "not_after") -> None:
        super().__init__(message, reason=reason)


class CalendarInUse(Refused):
    """``calendars delete`` of a calendar some live routine's schedule names; ``routines`` are their
    keys (``org/uid/routine_id``, the first few)."""

    def __init__(self, message: str, *, routines: tuple[str, ...] = ()) -> None:
        super().__init__(message, reason="in_use")
        self.routines = routines


class BackfillRefused(Refused):
    """``backfill`` refused a range: ``reason`` names the bound it crossed (``future``,
    ``registered_at``, ``pruned_through``, ``last_fire``, ``max``, ``empty``, ``pending``) or the
    routine's state (``paused``, ``disabled``); ``bound`` is that bound's value (an instant, or the
    ``--max`` count) and ``count`` the number of fires the range holds (None when not counted)."""

    def __init__(self, message: str, *, reason: str, bound: Any = None, count: int | None = None) -> None:
        super().__init__(message, reason=reason)
        self.bound = bound
        self.count = count


class StoreError(AlmaScheduleError):
    """The store failed; raised ``from`` the driver's error at one boundary."""


class StoreUnavailable(StoreError):
    """Cannot reach the store (connection refused, lost, or timed out)."""


class StoreConflict(StoreError):
    """A database constraint refused a write the caller did not expect to conflict."""


class SchemaMismatch(StoreError):
    """The database schema is missing or older than this version: run ``alma-schedule migrate``."""


class AdoptionRequired(SchemaMismatch):
    """The database holds a 0.1.0 store (its tables in the default schema, ``alembic_version`` at
    ``0001_initial``): ``migrate`` refuses, naming them, until ``migrate --adopt`` moves them."""


class DispatchError(AlmaScheduleError):
    """A message could not be handed to the broker."""


class RunnerError(AlmaScheduleError):
    """A runner, provider or sink failed; ``reason`` is a closed reason code."""

    def __init__(self, message: str, *, reason: str = "runner_error") -> None:
        super().__init__(message)
        self.reason = reason


class ProviderError(RunnerError):
    """The provider failed or refused (``provider_error``, ``provider_timeout``, ...).

    docs/architecture.md, "The modules, in detail" (errors.py, ProviderError).
    """

    def __init__(
        self,
        message: str,
        *,
        reason: str = "provider_error",
        status_code: int | None = None,
        phase: str | None = None,
    ) -> None:
        super().__init__(message, reason=reason)
        self.status_code = status_code
        self.phase = phase


class SinkError(RunnerError):
    """Delivery to a sink failed (``sink_error``); never retried."""

    def __init__(self, message: str, *, reason: str = "sink_error") -> None:
        super().__init__(message, reason=reason)


class OutcomeUncertain(RunnerError):
    """The provider may have billed and the runner cannot prove otherwise; raised ``from`` that failure.
    The run stays ``running``, its whole reservation held, blocked at once, until the operator records it.

    docs/architecture.md, "The modules, in detail" (errors.py, OutcomeUncertain).
    """


class SourceUnavailable(AlmaScheduleError):
    """An importer's source (the incumbent's database or Redis) cannot be read; the message names it."""


class UnknownSourceSchema(AlmaScheduleError):
    """The importer's source is not a schema it reads (a table or column missing: named)."""
