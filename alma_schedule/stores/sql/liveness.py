"""Dead pooled PostgreSQL connections are found on checkout WITHOUT a round trip.

SQLAlchemy's ``pool_pre_ping`` sends a ping on every checkout: one PostgreSQL round trip per
transaction (8 of an idle tick's ~25). Instead, :func:`install` checks the socket of the connection
being checked out, locally: an idle connection receives nothing from its server unless the server
is closing it (a terminated backend, a restart, an idle timeout send an error and close the
socket). A readable socket, or a connection libpq already knows is broken, makes the checkout raise
:class:`~sqlalchemy.exc.DisconnectionError`; the pool then discards that connection and hands out
a fresh one (SQLAlchemy's documented disconnect-on-checkout protocol). So the first statement after
a server closed our connection runs on a new one: it is never lost.

Not covered (as with a pre-ping, which would hang the same way): a peer that vanished without a
word (no FIN) is found by the first statement, which fails as :class:`StoreUnavailable`; the pool
then replaces every connection of that generation.
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
