"""How the SQL store executes its statements: :class:`Portable` (SQLAlchemy Core, correct on every
backend). :class:`~alma_schedule.stores.postgres.driver.PostgresDriver` overrides it where the
benchmark shows PostgreSQL's speed matters (docs/architecture.md, section "The portable store and
PostgreSQL's speed")."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from datetime import datetime
from typing import Any

from sqlalchemy.engine import Connection

from alma_schedule.model import TickEndAsk, TickEndParts
from alma_schedule.policies.backfill import FIRE_ORIGINS
from alma_schedule.stores.backfill_args import tick_end_args
from alma_schedule.stores.sql.engine import READ
from alma_schedule.stores.sql.queries import backfills, ticklog
from alma_schedule.stores.sql.queries import runs as runs_q

__all__ = ["CHUNK", "Portable", "Transaction"]

#: Rows per row-value list: SQLite binds each value, under its 32,766-variable limit.
CHUNK = 2000

#: The store's ``_tx``: ONE transaction behind the error boundary, by keyword (read, single, custom_plans).
Transaction = Callable[..., AbstractContextManager[Connection]]


class Portable:
    """Statements through SQLAlchemy Core; one writer at a time (SQLite's ``BEGIN IMMEDIATE``)."""

    #: ``FastClaims.claim_concurrency``: how many claims may usefully run at once.
    claim_concurrency = 1
    #: the one-statement forms (``start`` joined to its routine, the whole ``finish``) apply
    one_statement = False
    #: the claim's PostgreSQL forms apply: one scan per tick, the held rows' check, staging during the
    #: INSERT, rows reached at their address, the cursor moves in the supersede, arrays built ahead
    fast_claim = False

    def __init__(self, schema: str) -> None:
        self.schema = schema

    def configure(self, conn: Connection, *, read: bool, single: bool, custom_plans: bool) -> None:
        """The connection's options before its transaction begins (a read: a deferred ``BEGIN``)."""
        if read:
            conn.execution_options(**READ)

    def began(self, conn: Connection, *, read: bool, single: bool, custom_plans: bool) -> None:
        """Called first inside the transaction (nothing here)."""

    def rows(self, conn: Connection, stmt: Any, params: Any) -> list[Any]:
        """The rows of ``stmt`` (built once in :mod:`.queries`); positional access reads every
        backend's rows alike."""
        return list(conn.execute(stmt, params).all())

    def prepared_rows(self, conn: Connection, stmt: Any, params: Any) -> list[Any]:
        """:meth:`rows` of a statement worth preparing where the backend prepares."""
        return list(conn.execute(stmt, params).all())

    def one_row(self, conn: Connection, stmt: Any, params: Any) -> Any:
        """The first row of ``stmt``, or None (prepared where the backend prepares)."""
        return conn.execute(stmt, params).first()

    def locked(self, conn: Connection, stmt: tuple[Any, Any]) -> tuple[Iterable[Sequence[Any]], bool]:
        """The claim's locked due rows, in chunks, and whether each carries its row's address last
        (here: all at once, no address)."""
        return [conn.execute(*stmt).all()], False

    def exec(self, conn: Connection, stmt: Any, params: Any) -> None:
        """:meth:`rows` of a statement whose rows (if any) nobody reads."""
        conn.execute(stmt, params)

    @contextmanager
    def meanwhile(
        self, conn: Connection, statements: tuple[tuple[Any, Any], ...]
    ) -> Iterator[list[Callable[[], list[Any]]]]:
        """:meth:`rows` of each ``(stmt, params)``, read by calling its function after the block
        (here: executed on entry, in order)."""
        yield [_answer(self.rows(conn, stmt, params)) for stmt, params in statements]

    def chunks(self, items: list[Any]) -> list[list[Any]]:
        """``items`` in lists of at most :data:`CHUNK` (none for none)."""
        if len(items) <= CHUNK:
            return [items] if items else []
        return [items[i : i + CHUNK] for i in range(0, len(items), CHUNK)]

    def existing_runs(self, keys: Sequence[tuple[str, str, str, str]]) -> tuple[Any, Any]:
        """Which of these run keys exist (:func:`.queries.existing_runs`): statement and parameters."""
        return runs_q.existing_runs(keys)

    def prune_statement(self, before: datetime) -> Any:
        """``prune``'s statement (:func:`.queries.prune_returning`), its rows read by :meth:`pruned`."""
        return backfills.prune_returning(before)

    def pruned(self, rows: Sequence[Any]) -> tuple[int, dict[tuple[str, str, str], datetime]]:
        """``prune``'s count and each routine's latest pruned fire, from the rows of
        :func:`.queries.prune_returning`: here every deleted row, ``(key, origin, fire)``."""
        fires: dict[tuple[str, str, str], datetime] = {}
        for o, u, r, origin, f in rows:
            if origin in FIRE_ORIGINS and ((o, u, r) not in fires or f > fires[(o, u, r)]):
                fires[(o, u, r)] = f
        return len(rows), fires

    def tick_minute(self, dialect: str, now: datetime, claimed: int, p50: float | None, p95: float | None) -> list[Any]:
        """``log_tick``'s statements, run in order in one transaction (:func:`.queries.log_tick_minute`)."""
        return ticklog.log_tick_minute(dialect, now, claimed, p50, p95)

    def record_tick(self, tx: Transaction, dialect: str, params: dict[str, Any]) -> datetime | None:
        """``record_tick``'s statements (:func:`.queries.ticklog.record_tick`) in ONE transaction;
        the first one's value: the wake-up hint."""
        first, *rest = ticklog.record_tick(dialect)
        with tx() as conn:
            hint: datetime | None = conn.execute(first, params).scalar()
            for stmt in rest:
                conn.execute(stmt, params)
        return hint

    def begin_tick_end(self, tx: Transaction, ask: TickEndAsk) -> AbstractContextManager[Callable[[], TickEndParts]]:
        """Nothing starts early here: every part None (the ask checked first)."""
        tick_end_args(ask)
        return nullcontext(TickEndParts)


def _answer(rows: list[Any]) -> Callable[[], list[Any]]:
    """The answer of a statement executed already: its rows."""
    return lambda: rows
