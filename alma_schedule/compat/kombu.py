"""kombu's private parts that we use, each behind one function (``docs/architecture.md``, "Private
calls into dependencies"; pinned by ``tests/compat/test_compat_kombu.py``).

kombu is part of the ``celery`` extra: nothing is imported here at import time.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

__all__ = ["reraise_as_library_errors"]


def reraise_as_library_errors(connection: Any) -> AbstractContextManager[None]:
    """``connection._reraise_as_library_errors()``: a context in which a transport's recoverable
    connection or channel error (Redis's ``ConnectionError``, a socket's ``OSError``, ...) is raised
    again as kombu's ``OperationalError`` (``from`` the original), as Celery's ``app.send_task``
    wraps its publish.

    Private: the context manager of ``kombu.Connection`` that ``send_task`` uses.
    :class:`alma_schedule.tasks.publisher.Publisher` publishes each message the way ``send_task``
    does (without its per-message work), so a failed send raises the same error as Celery's would,
    which the dispatcher's callers catch (``docs/architecture.md``, the dispatch)."""
    manager: AbstractContextManager[None] = connection._reraise_as_library_errors()
    return manager
