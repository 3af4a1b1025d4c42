"""The kind -> runner registry: which :class:`RoutineRunner` serves a routine of a given ``kind``.

docs/architecture.md, section "The modules, in detail" (runners/registry.py).
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Iterable, Mapping
from importlib.metadata import entry_points
from typing import TYPE_CHECKING

from alma_schedule.errors import ConfigurationError
from alma_schedule.model import Routine, RoutineRunner, RunResult

if TYPE_CHECKING:
    from alma_schedule.model import RunHandle
    from alma_schedule.settings import Settings
    from alma_schedule.stores.base import Store

RunnerFactory = Callable[["Settings"], RoutineRunner]

ENTRY_POINT_GROUP = "alma_schedule.runners"

#: Kinds shipped with the package, as ``module:factory`` (imported on first use only).
BUILTIN_KINDS: Mapping[str, str] = {
    "task": "alma_schedule.runners.task:from_settings",
    "turn": "alma_schedule.runners.governed.factory:turn_runner_from_settings",
    "job": "alma_schedule.runners.governed.factory:job_runner_from_settings",
}


def load_factory(path: str) -> RunnerFactory:
    """Import ``module:attr`` and return the factory it names (:class:`ConfigurationError` if absent)."""
    module_name, sep, attr = path.partition(":")
    if not sep or not module_name or not attr:
        raise ConfigurationError(f"runner factory {path!r} must be 'module:factory'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigurationError(f"runner factory {path!r} cannot be imported: {exc}") from None
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise ConfigurationError(f"runner factory {path!r} does not exist or is not callable")
    return factory  # type: ignore[no-any-return]


def _source(spec: RunnerFactory | str) -> str:
    if isinstance(spec, str):
        return spec
    return f"{spec.__module__}:{getattr(spec, '__qualname__', repr(spec))}"


class UnknownKindRunner:
    """Serves a kind no factory knows: registration is refused and a run fails ``unknown_kind``."""

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def validate(self, routine: Routine) -> None:
        raise ConfigurationError(
            f"no runner serves kind {routine.kind!r} (built in: {', '.join(sorted(BUILTIN_KINDS))}; "
            f"others come from the {ENTRY_POINT_GROUP!r} entry points)"
        )

    def run(self, routine: Routine, handle: RunHandle) -> RunResult:
        return RunResult.failed("unknown_kind", cost_micros=0, error_class="UnknownKind")


class KindRegistry:
    """Kind -> factory, and kind -> runner (built once). Thread-safe.

    ``resolve(routine)`` is the resolver handed to ``create_scheduler``: a kind with no factory gets
    an :class:`UnknownKindRunner`; a factory that raises :class:`ConfigurationError` propagates it
    (the worker's start-up :meth:`check` normally caught that first).
    """

    def __init__(
        self,
        settings: Settings,
        *,
        factories: Mapping[str, RunnerFactory | str] | None = None,
        builtins: bool = True,
        use_entry_points: bool = True,
    ) -> None:
        self.settings = settings
        self._factories: dict[str, RunnerFactory | str] = {}
        self._runners: dict[str, RoutineRunner] = {}
        self._lock = threading.RLock()
        if builtins:
            self._factories.update(BUILTIN_KINDS)
        if use_entry_points:
            for ep in entry_points(group=ENTRY_POINT_GROUP):
                self._factories[ep.name] = ep.value
        for kind, factory in (factories or {}).items():
            self.register(kind, factory)

    def register(self, kind: str, factory: RunnerFactory | str) -> None:
        """Serve ``kind`` with ``factory`` (a callable or ``module:factory``); replaces any earlier one."""
        if not kind or not isinstance(kind, str):
            raise ConfigurationError("a runner kind must be a non-empty string")
        with self._lock:
            self._factories[kind] = factory
            self._runners.pop(kind, None)

    def kinds(self) -> list[str]:
        """The kinds this registry has a factory for (built or not)."""
        with self._lock:
            return sorted(self._factories)

    def forget_runners(self) -> None:
        """Drop every built runner (a forked child builds its own clients); factories stay."""
        with self._lock:
            self._runners.clear()

    def sources(self) -> dict[str, str]:
        """Each kind and where its factory comes from (``module:factory``), for ``worker-check``."""
        with self._lock:
            return {kind: _source(spec) for kind, spec in sorted(self._factories.items())}

    def knows(self, kind: str) -> bool:
        with self._lock:
            return kind in self._factories

    def runner(self, kind: str) -> RoutineRunner:
        """The runner of ``kind``, built on first use. Raises :class:`ConfigurationError` naming the
        missing setting when this configuration cannot serve it (nothing is cached then)."""
        with self._lock:
            cached = self._runners.get(kind)
            if cached is not None:
                return cached
            spec = self._factories.get(kind)
            if spec is None:
                return UnknownKindRunner(kind)
            factory = load_factory(spec) if isinstance(spec, str) else spec
            try:
                built = factory(self.settings)
            except ConfigurationError as exc:
                raise ConfigurationError(f"kind {kind!r} cannot be served: {exc}") from None
            self._runners[kind] = built
            return built

    def resolve(self, routine: Routine) -> RoutineRunner:
        """The engine's resolver: the runner of ``routine.kind``."""
        return self.runner(routine.kind)

    __call__ = resolve

    def check(self, kinds: Iterable[str]) -> list[str]:
        """Build the runner of every kind given; raise one :class:`ConfigurationError` listing each
        kind that cannot be served (an unknown kind, or the setting its factory names).

        Returns the kinds checked, sorted. Used at worker start with :func:`stored_kinds`.
        """
        problems: list[str] = []
        checked = sorted(set(kinds))
        for kind in checked:
            if not self.knows(kind):
                problems.append(
                    f"kind {kind!r} has no runner (install the package that serves it: "
                    f"entry point group {ENTRY_POINT_GROUP!r})"
                )
                continue
            try:
                self.runner(kind)
            except ConfigurationError as exc:
                problems.append(str(exc))
        if problems:
            raise ConfigurationError("this worker cannot serve the stored routines: " + "; ".join(problems))
        return checked


def stored_kinds(store: Store) -> set[str]:
    """The distinct kinds of the routines in ``store`` (system read, streamed; deleted ones skipped)."""
    kinds: set[str] = set()
    for routine in store.iter_routines():
        if routine.deleted_at is None:
            kinds.add(routine.kind)
    return kinds


def registry_resolver(settings: Settings) -> Callable[[Routine], RoutineRunner]:
    """A resolver over a fresh :class:`KindRegistry` of built-in and entry-point kinds (the CLI's)."""
    return KindRegistry(settings).resolve
