"""Statement forms a backend replaces: a portable builder marked :func:`replaceable` is the default,
and a backend's own package registers its form for its dialect with :func:`replaces` (PostgreSQL's
live in :mod:`alma_schedule.stores.postgres.forms`). One lookup per call; no dialect branch here."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["replaceable", "replaces"]

F = TypeVar("F", bound=Callable[..., Any])

#: (portable builder's qualified name, dialect) -> the backend's form.
_FORMS: dict[tuple[str, str], Callable[..., Any]] = {}


def _name(fn: Callable[..., Any]) -> str:
    return f"{fn.__module__}.{fn.__qualname__}"


def replaceable(fn: F) -> F:
    """``fn(dialect, ...)``, or the form registered for ``dialect`` (called with the same arguments)."""
    name = _name(fn)

    @functools.wraps(fn)
    def chosen(dialect: str, *args: Any, **kwargs: Any) -> Any:
        return _FORMS.get((name, dialect), fn)(dialect, *args, **kwargs)

    chosen.portable = fn  # type: ignore[attr-defined]
    return chosen  # type: ignore[return-value]


def replaces(portable: Callable[..., Any], dialect: str) -> Callable[[F], F]:
    """Register the decorated function as ``dialect``'s form of the :func:`replaceable` ``portable``."""
    target = _name(getattr(portable, "portable", portable))

    def register(fn: F) -> F:
        _FORMS[(target, dialect)] = fn
        return fn

    return register
