"""Dead pooled PostgreSQL connections are found on checkout WITHOUT a round trip.
docs/architecture.md, section "The modules, in detail" (stores/sql/liveness.py).
"""

from __future__ import annotations

import select
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Engine


def closed_by_server(dbapi_conn: Any) -> bool:
    """Whether this idle psycopg connection was closed by its server (no round trip: one poll)."""
    if dbapi_conn.closed or dbapi_conn.broken:
        return True
    try:
        readable, _, _ = select.select([dbapi_conn.fileno()], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)


def discard_if_closed(dbapi_conn: Any, _record: Any, _proxy: Any) -> None:
    """The pool's ``checkout`` listener: a connection its server closed is discarded, never used."""
    if closed_by_server(dbapi_conn):
        raise sa.exc.DisconnectionError("the server closed this pooled connection")


def install(engine: Engine) -> None:
    """Discard, on checkout, each pooled connection its server has closed (see the module docstring)."""
    event.listen(engine, "checkout", discard_if_closed)
