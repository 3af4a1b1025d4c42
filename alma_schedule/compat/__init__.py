"""The one home of our calls into the PRIVATE parts of our dependencies (``docs/architecture.md``,
"Private calls into dependencies").

One module per dependency: :mod:`.sqlalchemy`, :mod:`.psycopg`, :mod:`.kombu`, :mod:`.celery`. Each
private attribute, method or shape we rely on is reached through one small named function there,
whose docstring says what it relies on and why we need it; every such function is pinned by a test
of ``tests/compat/`` that runs the installed dependency itself (no mock) and fails when the shape
changes; and each of the four is capped below its next minor in ``pyproject.toml``, so an upgrade
is a deliberate step that runs those tests. Outside this package no private name of the four is
used (``tests/compat/test_no_private_names.py`` greps the package for one).

Nothing here imports its dependency at import time (each function imports what it needs on its
first call): a bare install, without Celery, kombu or psycopg, imports these modules freely.
"""

from __future__ import annotations
