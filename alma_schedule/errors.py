"""Every error alma-schedule raises on purpose. One root, one module.

The tree::

    AlmaScheduleError                      root: catch this to catch everything of ours
    ├── ConfigurationError (ValueError)    a setting is unknown, malformed or missing (names it);
    │                                      or a feature's extra is not installed (names the extra)
    │   └── ProcessRefused (SystemExit)    the same, refusing a Celery process of ours (a worker's
    │                                      start, `celery call`): it exits with ONE line, no traceback
    ├── InvalidSchedule (ValueError)       a schedule the core rejects (names the field and reason)
    ├── InvalidInput (ValueError)          an id, scope, JSON body or argument that cannot be stored
    ├── RegistrationRefused (ValueError)   register() said no: schedule, budget, runner, tombstone
    ├── NotFound (LookupError)             a routine or run that does not exist in this scope
    ├── Refused                            a lever or trigger refused: paused / disabled / deleted
    │   ├── Overlap                        a trigger while a run is active (carries the blocking run)
    │   └── BackfillRefused                a backfill range out of bounds, too long, or on an inactive
    │                                      routine (names the bound and the count)
    ├── StoreError                         the store failed (mapped from driver errors, `from exc`)
    │   ├── StoreUnavailable               cannot connect / connection lost / timed out
    │   ├── StoreConflict                  a constraint said no that the caller did not expect
    │   └── SchemaMismatch                 the database is not migrated to this version
    │       └── AdoptionRequired           a 0.1.0 store: `migrate --adopt` moves its tables
    ├── DispatchError                      a message could not be sent to the broker
    └── RunnerError                        a runner or provider failed (closed reason code attached)
        ├── ProviderError                  the provider said no or failed (reason: provider_*)
        ├── SinkError                      the sink failed (reason: sink_error)
        └── OutcomeUncertain               the provider accepted, recording that failed: the engine
                                           leaves the run non-terminal (reservation held) for `record`

Messages are for humans and never contain secrets or raw provider/sink text for the ledger:
the ledger only ever stores closed reason codes (see :mod:`alma_schedule.model`).
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


#: The optional dependencies of each extra, by top-level module (see pyproject.toml).
EXTRA_MODULES: dict[str, tuple[str, ...]] = {
    "celery": ("celery", "kombu", "redis"),
    "postgres": ("psycopg",),
    "http": ("starlette", "uvicorn"),
    "openai": ("httpx",),
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

    Two facts an adapter reports so the governed runners can tell whether the request may have
    reached the provider (the one decision: ``runners.governed.outcome.request_never_left``):
    ``status_code``, the HTTP status the provider answered, and ``phase``, where the call failed
    before any answer (``connect``, ``pool``, ``not_sent``: ``outcome.NEVER_LEFT_PHASES``; None =
    unknown, so the request may have left)."""

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
    """The provider may have billed and the runner cannot prove otherwise: a call that failed after
    its request may have left (a reset, a 5xx or 408, a timeout, a time limit), or one the provider
    ACCEPTED that the runner could not persist (e.g. the store failed right after the call); raised
    ``from`` that failure.

    The engine does not finish such a run: it stays ``running`` (or whatever the store last
    recorded) with its whole reservation held and its cost at least that bound, marked blocked at
    once (``uncertain_outcome``), visible in ``runs stuck`` and the tick's ``blocked``, until the
    operator ``record``s it. Nothing retries it (guarantee 1: a fire lost after ``running`` is
    never re-run).
    """
