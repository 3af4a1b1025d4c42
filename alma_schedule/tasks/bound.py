"""Which composition each Celery app was installed with: a weak map, so an app can still be collected.

Kept apart from :mod:`alma_schedule.tasks.composition` so that the dispatcher, which the composition
builds, can ask whether its app is a fleet's own without importing the composition back.
"""

from __future__ import annotations

import weakref
from typing import Any

__all__ = ["bind", "bound_to", "is_fleet_app"]

_BOUND: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


def bind(app: Any, composition: object) -> None:
    """Make ``composition`` the one installed on ``app``."""
    _BOUND[app] = composition


def bound_to(app: Any) -> object | None:
    """What :func:`bind` recorded for ``app`` (None if nothing was installed on it)."""
    return _BOUND.get(app)


def is_fleet_app(app: Any) -> bool:
    """True unless ``app`` is our ready app (an app nobody installed on counts as a fleet's own)."""
    installed = _BOUND.get(app)
    return installed is None or bool(getattr(installed, "fleet", True))
