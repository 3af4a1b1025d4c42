"""The Celery adapter: ``install`` for an existing fleet, and ``app``, the ready app.

docs/architecture.md, section "The modules, in detail" (celery.py).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from alma_schedule.tasks.app import create_app, ready_app_config
from alma_schedule.tasks.install import install

if TYPE_CHECKING:
    from celery import Celery

__all__ = ["create_app", "install", "ready_app_config"]  # `app` is lazy: module __getattr__

_lock = threading.Lock()
_app: Celery | None = None


def __getattr__(name: str) -> Any:
    if name in ("app", "celery"):
        global _app
        with _lock:
            if _app is None:
                _app = create_app()
            return _app
    raise AttributeError(f"module 'alma_schedule.celery' has no attribute {name!r}")
