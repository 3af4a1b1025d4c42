"""The beat replacement path: ``task`` routines that send a fleet's own Celery tasks, and the
``beat_schedule`` importer (``alma-schedule import-beat``).

* :mod:`alma_schedule.runners.task`: :class:`TaskRunner` (kind ``task``) and ``from_settings``, the
  factory the Celery face's kind registry imports.
* :mod:`alma_schedule.beat.convert`: pure conversion of ``beat_schedule`` entries, or a refusal
  with the reason.
* :mod:`alma_schedule.beat.importer`: registers converted entries through the engine (idempotent).

Importing this package imports no Celery; the submodules import it when used.
"""

from __future__ import annotations

__all__ = ["KIND"]

KIND = "task"
