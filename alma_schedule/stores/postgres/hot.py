"""PostgreSQL's hot statements on the pooled driver connection: each rendered once per (statement,
schema) (:func:`rendered`); the run side's two per-fire statements, the tick probe, ``record_tick`` and
the blocked read prepared (:func:`one_row`, :func:`prepared_rows`); the others sent unnamed or in a
custom-plans transaction (:func:`all_rows`, :func:`begin_custom_plans`); errors leave as SQLAlchemy's
(docs/architecture.md, section "The modules, in detail", ``stores/postgres/hot.py``)."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NoReturn

from sqlalchemy import exc as sa_exc
from sqlalchemy.dialects.postgresql.psycopg import PGDialect_psycopg
from sqlalchemy.engine import Connection

from alma_schedule.compat import psycopg as pg_compat
from alma_schedule.compat import sqlalchemy as sa_compat
from alma_schedule.stores.sql.namespace import SCHEMA_TOKEN

__all__ = [
    "CUSTOM_PLANS", "ArrayLiteral", "Rendered", "array_literal", "Sent", "all_rows", "begin_custom_plans", "cursor_for",
    "one_row", "prepared_rows", "rendered", "sent_rows",
]  # fmt: skip

#: Compiles the hot statements with ``$n`` placeholders (PostgreSQL's own, no client-side rewrite).
_DIALECT = PGDialect_psycopg(paramstyle="numeric_dollar")  # type: ignore[no-untyped-call]


@dataclass(frozen=True, slots=True)
class Rendered:
    """One statement as sent: its text (namespace written in), its parameters' names in ``$n``
    order with their bind processors, and the values SQLAlchemy bound itself (literals)."""

    sql: str
    names: tuple[str, ...]
    processors: tuple[Callable[[Any], Any] | None, ...]
    fixed: Mapping[str, Any]

    def args(self, params: Mapping[str, Any]) -> list[Any]:
        """The positional values of ``params`` (plus the fixed ones), each through its processor, as
        untyped text (see :func:`_text`); an array's as a list."""
        out: list[Any] = []
        for name, proc in zip(self.names, self.processors, strict=True):
            value = params[name] if name in params else self.fixed[name]
            if type(value) is ArrayLiteral:  # rendered ahead (:func:`array_literal`)
                out.append(str(value))
                continue
            if value is not None and proc is not None:
                value = proc(value)
            if value is None or _as_is(value):
                out.append(_array(value) if type(value) is list else value)
            else:
                out.append(_text(value))
        return out


class ArrayLiteral(str):
    """An array parameter rendered ahead by :func:`array_literal`: :meth:`Rendered.args` sends it as
    it is (no bind processor: only for arrays of text or of aware instants, whose processors leave
    the values as they are)."""

    __slots__ = ()


def array_literal(values: list[Any]) -> list[Any] | ArrayLiteral:
    """``values`` rendered NOW as :meth:`Rendered.args` would render them at the send (the literal of
    :func:`_array`; the list itself when it cannot be one): a caller with time to spare (waiting
    for the server) renders the arrays of its next statement ahead."""
    text = _array(values)
    return ArrayLiteral(text) if isinstance(text, str) else values


def _array(values: list[Any]) -> Any:
    """An array parameter as the text of a PostgreSQL array literal (``{"a",NULL,"b"}``), its cast typing
    it: for lists of strings needing no escape or of aware datetimes (with NULLs); any other list as it is
    (the connection's binary list dumper). Why: docs/architecture.md (stores/postgres/hot.py)."""
    if not values:
        return values
    kinds = set(map(type, values))
    kinds.discard(type(None))
    if kinds and all(issubclass(kind, str) for kind in kinds):  # str, or a str enum (a state): its value
        present = [v for v in values if v is not None] if None in values else values
        joined = "".join(present)
        if '"' in joined or "\\" in joined:
            return values
        if present is values:
            return '{"' + '","'.join(values) + '"}'
        return "{" + ",".join("NULL" if v is None else '"' + v + '"' for v in values) + "}"  # + : the raw text
    if kinds == {datetime}:
        texts: dict[Any, str] = {None: "NULL"}
        for at in set(values):
            if at is not None:
                if at.tzinfo is None or at.utcoffset() is None:
                    return values
                texts[at] = f'"{at.isoformat()}"'
        return "{" + ",".join(map(texts.__getitem__, values)) + "}"
    return values


def _as_is(value: object) -> bool:
    """An array (a list: the connection's binary list dumper, typed by its cast) or a value the
    dialect's processor already wrapped for psycopg (JSON): sent as it is."""
    return isinstance(value, list) or type(value).__module__.startswith("psycopg.")


def _text(value: object) -> str:
    """A parameter as text of no declared type: every ``$n`` of a hot statement carries its cast
    (checked by :func:`rendered`), so PostgreSQL types it, and the statement's parameter types never
    depend on the values (psycopg would type an int by its size and a None as unknown, and prepare
    one statement per combination)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(
        f"a hot statement takes text, integer, float, boolean and datetime values, not {type(value).__name__}"
    )


@functools.lru_cache(maxsize=512)
def rendered(stmt: Any, schema: str) -> Rendered:
    """``stmt`` (a statement built once in :mod:`.queries`) compiled for PostgreSQL in ``schema``."""
    compiled = stmt.compile(dialect=_DIALECT, schema_translate_map={SCHEMA_TOKEN: schema})
    sql = sa_compat.render_schema_translates(_DIALECT, compiled.string, {SCHEMA_TOKEN: schema})
    if "__[POSTCOMPILE_" in compiled.string:  # an expanding IN: its text depends on the values
        raise ValueError("a hot statement cannot take an expanding (list) parameter")
    names = tuple(compiled.positiontup or ())
    untyped = [n for i, n in enumerate(names, 1) if not re.search(rf"\${i}::|CAST\(\${i} AS ", sql)]
    if untyped:
        raise ValueError(f"the parameters {untyped} of a hot statement carry no cast")
    processors = tuple(compiled.binds[n].type.dialect_impl(_DIALECT).bind_processor(_DIALECT) for n in names)
    fixed = {n: compiled.binds[n].effective_value for n in names if not compiled.binds[n].required}
    return Rendered(sql, names, processors, fixed)


def one_row(conn: Connection, stmt: Any, schema: str, params: Mapping[str, Any]) -> tuple[Any, ...] | None:
    """Execute ``stmt`` (prepared: its cached plan) on ``conn``'s driver connection; its first row."""
    rows = prepared_rows(conn, stmt, schema, params)
    return rows[0] if rows else None


def prepared_rows(conn: Connection, stmt: Any, schema: str, params: Mapping[str, Any]) -> list[tuple[Any, ...]]:
    """Execute ``stmt`` (prepared: its cached plan) on ``conn``'s driver connection; all its rows."""
    return _run(conn, rendered(stmt, schema), params, prepare=True)


def all_rows(conn: Connection, stmt: Any, schema: str, params: Mapping[str, Any]) -> list[tuple[Any, ...]]:
    """Execute ``stmt`` on ``conn``'s driver connection, rendered once per (statement, schema), planned for
    its parameters at every execution; all its rows as the driver's tuples. Sent unnamed, or prepared
    inside :func:`begin_custom_plans`. Errors leave as SQLAlchemy's would.
    docs/architecture.md, section "The modules, in detail" (stores/postgres/hot.py).
    """
    custom = bool(conn.get_execution_options().get(CUSTOM_PLANS))
    return _run(conn, rendered(stmt, schema), params, prepare=custom)


#: The execution option of a connection whose transaction :func:`begin_custom_plans` opened.
CUSTOM_PLANS = "alma_custom_plans"
#: One simple query, one round trip (the one psycopg's own ``BEGIN`` took): the transaction, and
#: in it (``LOCAL``: until its COMMIT or ROLLBACK) custom plans only for every statement.
_BEGIN_CUSTOM = b"BEGIN; SET LOCAL plan_cache_mode = force_custom_plan"


def begin_custom_plans(conn: Connection) -> None:
    """Open the transaction of ``conn`` (checked out in AUTOCOMMIT mode, so the driver opens none
    itself; SQLAlchemy's COMMIT or ROLLBACK ends it) with ``plan_cache_mode = force_custom_plan``
    for its duration, and mark ``conn`` so that :func:`all_rows` prepares its statements.
    docs/architecture.md, section "The modules, in detail" (stores/postgres/hot.py).
    """
    import psycopg

    driver = conn.connection.driver_connection
    assert isinstance(driver, psycopg.Connection)
    try:
        driver.execute(_BEGIN_CUSTOM)
    except psycopg.Error as exc:
        _raise(conn, driver, None, exc, _BEGIN_CUSTOM.decode(), [])
    conn.execution_options(**{CUSTOM_PLANS: True})


def _run(conn: Connection, hot: Rendered, params: Mapping[str, Any], *, prepare: bool) -> list[tuple[Any, ...]]:
    return _send(conn, hot, params, prepare=prepare).rows()


def sent_rows(conn: Connection, stmt: Any, schema: str, params: Mapping[str, Any], *, prepare: bool) -> Sent:
    """SEND ``stmt`` as :func:`prepared_rows` (``prepare``) or :func:`all_rows` would, its rows read
    later with :meth:`Sent.rows`. In the driver connection's pipeline mode (psycopg's
    ``Connection.pipeline()``) the statement leaves at once and the server runs it while this
    process does other work; read its rows only after the pipeline ended (its results are then
    attached to the cursor, no round trip)."""
    return _send(conn, rendered(stmt, schema), params, prepare=prepare)


@dataclass(slots=True)
class Sent:
    """One statement sent on ``conn``'s driver connection, its cursor still open."""

    conn: Connection
    driver: Any
    cur: Any
    sql: str
    args: Any

    def rows(self) -> list[tuple[Any, ...]]:
        """Its rows (none when it returned no result set); closes its cursor. Raises as SQLAlchemy
        would (:func:`_raise`) when it failed or no result came back."""
        import psycopg

        cur, conn = self.cur, self.conn
        try:
            # rows only when the statement returned a result set; read from the result's status, not
            # ``cur.description`` (pg_compat.result_has_rows says why)
            has_rows = pg_compat.result_has_rows(cur)
            if has_rows is None:  # never answered (a pipeline that ended before its result came back)
                raise psycopg.OperationalError("the statement's result never arrived")
            rows: list[tuple[Any, ...]] = cur.fetchall() if has_rows else []
            sa_compat.fire_after_cursor_execute(conn, cur, self.sql, self.args)
        except psycopg.Error as exc:
            _raise(conn, self.driver, cur, exc, self.sql, self.args)
        finally:
            cur.close()
        return rows


def cursor_for(conn: Connection, hot: Rendered, params: Mapping[str, Any]) -> tuple[Any, Any, str, list[Any]]:
    """``(driver connection, raw cursor, sql, args)`` of one execution of ``hot`` on ``conn``, the
    engine's ``before_cursor_execute`` listeners told (echo, tracing, tests: as SQLAlchemy would)."""
    args = hot.args(params)
    import psycopg  # here, not at import: a bare (SQLite) install has no driver for PostgreSQL

    driver = conn.connection.driver_connection
    assert isinstance(driver, psycopg.Connection)
    cur = psycopg.RawCursor(driver)
    sql, args = sa_compat.fire_before_cursor_execute(conn, cur, hot.sql, args)
    return driver, cur, sql, args


def _send(conn: Connection, hot: Rendered, params: Mapping[str, Any], *, prepare: bool) -> Sent:
    import psycopg

    driver, cur, sql, args = cursor_for(conn, hot, params)
    threshold = pg_compat.prepare_threshold_of(driver)
    if prepare:
        pg_compat.set_prepare_threshold(driver, 0)  # this one only (PG_PLAN_CACHE)
    sent = False
    try:
        cur.execute(sql, args, prepare=prepare)
        sent = True
    except psycopg.Error as exc:
        _raise(conn, driver, cur, exc, sql, args)
    finally:
        pg_compat.set_prepare_threshold(driver, threshold)
        if not sent:
            cur.close()
    return Sent(conn, driver, cur, sql, args)


def _raise(conn: Connection, driver: Any, cur: Any, exc: Any, sql: str, args: Any) -> NoReturn:
    """A driver error as SQLAlchemy's ``DBAPIError`` (invalidating ``conn`` on a disconnect)."""
    import psycopg

    gone = conn.dialect.is_disconnect(exc, driver, cur)
    if gone:
        conn.invalidate(exc)
    raise sa_exc.DBAPIError.instance(
        sql, args, exc, psycopg.Error, connection_invalidated=gone, dialect=conn.dialect
    ) from exc
