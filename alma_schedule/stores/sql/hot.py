"""The run side's two per-fire statements (the start CAS, the one-statement finish), the tick probe and
the end of a tick (``record_tick``) on PostgreSQL, sent on the pooled driver connection as NAMED
prepared statements (:func:`one_row`); and the tick's other statements (``claim_due``'s, the blocked
read), rendered the same way once and planned for their parameters at every execution
(:func:`all_rows`): sent UNNAMED, or, in a claim's transaction, which forces custom plans
(:func:`begin_custom_plans`), prepared so that they are parsed once per connection (the claim's
locking select is streamed, unnamed, and its writes sent ahead: :mod:`.ahead`).

Why: a packed ``run_many`` message runs each of its fires through these two statements, and through
SQLAlchemy's execution each paid, per call, in this process: the schema-name translation of its
text (``schema_translate_map`` rewrites the placeholder in 4-8 kB of SQL with a regex on every
execution), psycopg's re-parse of a query longer than its 4 kB query cache, the cursor description
of ~60 returned columns and the result machinery; and on the server a fresh plan for each
execution. Here each statement (still built by SQLAlchemy Core in :mod:`.queries`) is compiled and
rendered ONCE per (statement, schema): the namespace written in, ``$n`` placeholders
(:func:`rendered`); :func:`one_row` binds its parameters through the statement's own bind
processors (sent as untyped text that the statement's casts type: one prepared statement per
shape, whatever the values), executes it on the checked-out psycopg connection with a raw cursor, prepared, and
returns the row as a tuple (positional, as :mod:`.rows` reads it). The engine's
``before_cursor_execute`` / ``after_cursor_execute`` listeners still see each execution (the
rendered text and its positional parameters). The private parts of SQLAlchemy and psycopg this
relies on (the schema names rendered into the text, the listeners told by hand, a result's libpq
status) are reached through :mod:`alma_schedule.compat` (``docs/architecture.md``, "Private calls
into dependencies"). A statement's first execution on a connection sends
its Parse first: one more round trip, once per connection and statement shape.

The plans (:data:`.engine.PG_PLAN_CACHE`): every other statement is sent UNNAMED, or prepared in a
transaction that forces custom plans, so PostgreSQL plans it for its parameters at every execution
(the generic-plan trap of the tick's supersede UPDATE cannot return); these two are prepared, so
after five custom plans PostgreSQL caches a generic one (``plan_cache_mode = auto``). A generic plan
is the right plan for them whatever the parameters: every row they touch is reached by equality on a
full key: the run through the open run's unique index ``uq_runs_one_active`` (or the runs primary
key), its routine by the routines primary key, the routine's buffered row through
``uq_runs_one_buffered``, the spend rows by the spend primary key (ceiling, day); one row each, no
array and no range whose size a generic plan would have to guess. Their state guards are values no
plan sees (:func:`.queries.common.owned_states`): with the literal, a generic plan cached while few
runs were claimed read a burst's claimed runs through ``ix_runs_expires`` filtered by key at every
start, and the planner's one-row-per-routine estimate let the finish read a routine's whole ledger
through ``ix_runs_routine_fire`` (``tests/stores/test_sql_hot.py`` EXPLAINs both statements, generic
and custom, over an analyzed ledger and over a burst the statistics predate, and checks that these,
and only these, are prepared). The tick probe (``store.probe_tick``, every tick) is prepared too:
each of its arms is an ordered ``LIMIT 1`` probe of a partial index, the plan its generic form is
built for whatever the statistics (``tests/stores/test_sql_explain.py``); planning it per execution
cost more than running it. So is the end of a tick (``store.record_tick``, every tick): every row it
writes is found by key (the heartbeat's, the minute's, the pruned minutes' through an ordered
``LIMIT`` scan of the tick log's key) and each part of its wake-up hint is an ordered ``LIMIT 1``
probe of a partial index (``tests/stores/test_sql_hot.py`` EXPLAINs its generic plan). And so is the
tick's report of blocked runs (``store.blocked``, every tick that has one; :func:`prepared_rows`):
each of its arms holds only open runs, so every plan of it reads the open runs' partial indexes,
never the ledger.

Errors leave as SQLAlchemy's would (:func:`one_row` wraps a driver error in SQLAlchemy's
``DBAPIError``, invalidating the connection on a disconnect), so the store's error boundary maps them
to the same :class:`~alma_schedule.errors.StoreError` subclasses.
"""

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
    """An array parameter as the text of a PostgreSQL array literal (``{"a",NULL,"b"}``: C-speed
    joins, where the binary list dumper walks the list in Python, about 0.25 ms per 1,000 strings
    and 0.18 ms per 1,000 instants), its cast typing it (``$n::TEXT[]``, ``$n::TIMESTAMPTZ[]``): a
    list of strings (a ``str`` enum's: its value, as psycopg would send it) none of which holds a
    double quote or a backslash, or of aware datetimes (each distinct one written once,
    ``isoformat`` with its offset: the instant whatever the session's zone), either with NULLs.
    Any other list (numbers, naive datetimes, a string that would need escaping) as it is: the
    connection's binary list dumper."""
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
    """Execute ``stmt`` on ``conn``'s driver connection, planned for its parameters at every
    execution (as every statement but the prepared ones: :data:`.engine.PG_PLAN_CACHE`); all its
    rows, as the driver's tuples. The tick's own statements go so (``claim_due``'s, the blocked
    read): rendered once per (statement, schema) like the prepared ones, so an execution skips
    SQLAlchemy's per-call work (the statement's cache key, the schema-name rewrite of its text,
    the result machinery) and psycopg's placeholder conversion, about 0.1 ms a statement. Array
    parameters travel as lists (the connection's binary list dumper; their casts type them).

    Sent UNNAMED, except in a transaction opened by :func:`begin_custom_plans`: there it is
    prepared (named, parsed once per connection) and every execution still gets its own custom
    plan, as the transaction forces (no generic plan can be chosen in it)."""
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

    Why (the tick's claim batches, :mod:`.store_tick`): unnamed, each of a batch's four to six
    statements was parsed and analyzed again at every execution (0.8 ms of a tick at 1,000
    routines, measured in the server's log); prepared in the default ``auto`` mode, PostgreSQL
    would switch them to a cached generic plan after five executions, which cannot see the length
    of their key arrays (the generic-plan trap of :data:`.engine.PG_PLAN_CACHE`). Forced custom,
    they are parsed once per connection and planned for their parameters every time."""
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
