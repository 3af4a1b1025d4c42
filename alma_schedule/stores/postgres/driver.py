"""``PostgresDriver``: the SQL store's statements on PostgreSQL, where the benchmark shows speed
matters: autocommit for reads and single statements, statements at the driver level (:mod:`.hot`),
sent ahead or streamed (:mod:`.ahead`), claims on the pool's connections at once, and the tick's
pipelined end (:mod:`.tick_end`). Everything else is the portable store's (docs/architecture.md,
section "The portable store and PostgreSQL's speed")."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime
from typing import Any

from sqlalchemy.engine import Connection

from alma_schedule.model import TickEndAsk, TickEndParts
from alma_schedule.stores.postgres import ahead, hot, queries, tick_end
from alma_schedule.stores.postgres import forms as _forms  # noqa: F401  (registers its statement forms)
from alma_schedule.stores.postgres import inserts as _inserts  # noqa: F401  (registers its statement forms)
from alma_schedule.stores.sql.driver import Portable, Transaction
from alma_schedule.stores.sql.rows import as_utc

__all__ = ["PostgresDriver", "driver_for"]

POSTGRESQL = "postgresql"  # SQLAlchemy's name of the dialect
#: The claim's locked due rows decided at a time, as they arrive (:meth:`PostgresDriver.locked`).
STREAM_CHUNK = 100


class PostgresDriver(Portable):
    """See the module docstring."""

    one_statement = True
    fast_claim = True

    def __init__(self, schema: str, pool_size: int) -> None:
        super().__init__(schema)
        #: claims run at once on the pool's connections (row locks, SKIP LOCKED)
        self.claim_concurrency = max(1, pool_size)

    def configure(self, conn: Connection, *, read: bool, single: bool, custom_plans: bool) -> None:
        """Reads, single statements and the claims in autocommit mode (a statement is its own
        transaction; the claims' ``BEGIN`` is :func:`.hot.begin_custom_plans`')."""
        if read or single or custom_plans:
            conn.execution_options(isolation_level="AUTOCOMMIT")

    def began(self, conn: Connection, *, read: bool, single: bool, custom_plans: bool) -> None:
        if custom_plans and not (read or single):
            hot.begin_custom_plans(conn)

    def rows(self, conn: Connection, stmt: Any, params: Any) -> list[Any]:
        """Rendered once, sent unnamed: the driver's tuples (:func:`.hot.all_rows`)."""
        return hot.all_rows(conn, stmt, self.schema, params)

    def prepared_rows(self, conn: Connection, stmt: Any, params: Any) -> list[Any]:
        return list(hot.prepared_rows(conn, stmt, self.schema, params))

    def one_row(self, conn: Connection, stmt: Any, params: Any) -> Any:
        return hot.one_row(conn, stmt, self.schema, params)

    def locked(self, conn: Connection, stmt: tuple[Any, Any]) -> tuple[Iterable[Sequence[Any]], bool]:
        """Streamed, :data:`STREAM_CHUNK` rows at a time (:func:`.ahead.streamed`): the first are
        decided while the database still locks and sends the others; each row's address last."""
        return ahead.streamed(conn, stmt[0], self.schema, stmt[1], STREAM_CHUNK), True

    def exec(self, conn: Connection, stmt: Any, params: Any) -> None:
        hot.all_rows(conn, stmt, self.schema, params)

    @contextmanager
    def meanwhile(
        self, conn: Connection, statements: tuple[tuple[Any, Any], ...]
    ) -> Iterator[list[Callable[[], list[Any]]]]:
        """All sent on entry (pipeline mode, :func:`.ahead.meanwhile`); the server runs them while
        the block's Python runs; their answers in one round trip at the block's end."""
        with ahead.meanwhile(conn, self.schema, statements) as answers:
            yield answers

    def chunks(self, items: list[Any]) -> list[list[Any]]:
        """One list: PostgreSQL binds arrays (one statement whatever the size)."""
        return [items] if items else []

    def existing_runs(self, keys: Sequence[tuple[str, str, str, str]]) -> tuple[Any, Any]:
        """Arrays of the keys (:func:`.queries.existing_runs`)."""
        return queries.existing_runs(keys)

    def prune_statement(self, before: datetime) -> Any:
        """Aggregated in the statement (:func:`.queries.prune_returning`)."""
        return queries.prune_returning(before)

    def pruned(self, rows: Sequence[Any]) -> tuple[int, dict[tuple[str, str, str], datetime]]:
        """Aggregated by the statement: ``(key, count, latest fire)``."""
        count = sum(int(n) for _, _, _, n, _ in rows)
        return count, {(o, u, r): f for o, u, r, _, f in rows if f is not None}

    def tick_minute(self, dialect: str, now: datetime, claimed: int, p50: float | None, p95: float | None) -> list[Any]:
        """ONE statement (:func:`.queries.log_tick_minute`)."""
        return queries.log_tick_minute(now, claimed, p50, p95)

    def record_tick(self, tx: Transaction, dialect: str, params: dict[str, Any]) -> datetime | None:
        """ONE prepared statement (:func:`.queries.record_tick`), autocommit."""
        with tx(single=True) as conn:
            row = hot.one_row(conn, queries.record_tick()[0], self.schema, params)
        return as_utc(row[0]) if row is not None else None

    def begin_tick_end(self, tx: Transaction, ask: TickEndAsk) -> AbstractContextManager[Callable[[], TickEndParts]]:
        """Pipelined on one connection (:mod:`.tick_end`)."""
        return tick_end.begin(tx, self.schema, ask)


def driver_for(dialect: str, schema: str, pool_size: int) -> Portable:
    """The driver of a store on ``dialect``: PostgreSQL's, else the portable one."""
    return PostgresDriver(schema, pool_size) if dialect == POSTGRESQL else Portable(schema)
