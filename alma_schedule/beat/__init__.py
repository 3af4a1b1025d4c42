"""The beat replacement path: ``task`` routines that send a fleet's own Celery tasks, and the
``beat_schedule`` importer (``alma-schedule import-beat``).

docs/architecture.md, section "The modules, in detail" (beat/__init__.py).
"""

from __future__ import annotations

__all__ = ["KIND"]

KIND = "task"
