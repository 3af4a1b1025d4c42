"""Import a fleet's Celery app by its path (``MODULE:APP``), as ``celery -A`` does: the ``task``
kind's app (``ALMA_CELERY_APP``) and the CLI's ``-A``. Re-exported by :mod:`alma_schedule.runners.task`."""

from __future__ import annotations

import importlib
import os
import sys
from typing import TYPE_CHECKING, Any

from alma_schedule.errors import ConfigurationError, missing_extra

if TYPE_CHECKING:
    from celery import Celery

__all__ = ["load_celery_app"]


def load_celery_app(path: str, *, setting: str = "ALMA_CELERY_APP") -> Celery:
    """Import ``MODULE:APP`` (or ``MODULE``: its ``app`` or ``celery``, else ``MODULE.celery``'s) and
    return the Celery app, as ``celery -A`` does: the working directory is put on ``sys.path`` first.

    Raises :class:`ConfigurationError` naming ``setting`` and the import error when it cannot.
    """
    try:
        from celery import Celery
    except ModuleNotFoundError as exc:
        raise missing_extra(exc, "celery", "a Celery fleet app") from None

    module_name, sep, attr = path.strip().partition(":")
    if not module_name or (sep and not attr):
        raise ConfigurationError(f"{setting}: {path!r} is not MODULE:APP")
    cwd = os.getcwd()
    if cwd not in sys.path:  # like `celery -A`: the app module is found from the working directory
        sys.path.insert(0, cwd)
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigurationError(f"{setting}: cannot import {module_name!r}: {exc}") from exc
    candidates = [attr] if attr else ["app", "celery"]
    if not attr and not any(isinstance(getattr(module, n, None), Celery) for n in candidates):
        try:  # `celery -A proj` also finds proj.celery:app
            module = importlib.import_module(f"{module_name}.celery")
        except ImportError:
            pass
    for name in candidates:
        value: Any = module
        try:
            for part in name.split("."):
                value = getattr(value, part)
        except AttributeError:
            continue
        if isinstance(value, Celery):
            return value
        raise ConfigurationError(f"{setting}: {path!r} is a {type(value).__name__}, not a Celery app")
    raise ConfigurationError(f"{setting}: module {module_name!r} has no attribute {candidates[0]!r}")
