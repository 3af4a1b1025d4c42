"""``dump_store``: a comparable snapshot of EVERYTHING a store holds, to prove a refusal wrote nothing.
docs/architecture.md, section "The modules, in detail" (testing/dump.py).
"""

from __future__ import annotations

import copy
from typing import Any

from alma_schedule.stores.base import Store

__all__ = ["dump_store"]


def _sql_dump(store: Any) -> dict[str, list[tuple[Any, ...]]]:
    import sqlalchemy as sa

    from alma_schedule.stores.sql.schema import metadata

    out: dict[str, list[tuple[Any, ...]]] = {}
    with store.engine.connect() as conn:
        for table in metadata.sorted_tables:
            rows = conn.execute(sa.select(table)).all()
            out[table.name] = sorted((tuple(r) for r in rows), key=repr)
    return out


def _memory_dump(store: Any) -> dict[str, Any]:
    with store._lock:
        return {name: copy.deepcopy(value) for name, value in vars(store).items() if name != "_lock"}


def _protocol_dump(store: Store) -> tuple[Any, ...]:
    routines = tuple(store.iter_routines())
    return tuple(
        (
            r,
            tuple(store.routine_versions(r.scope, r.routine_id)),
            tuple(store.list_runs(r.scope, routine_id=r.routine_id, limit=10**6)),
        )
        for r in routines
    )


def dump_store(store: Store) -> Any:
    """Every row the store holds, as a value that compares equal exactly when nothing changed."""
    from alma_schedule.stores.memory import MemoryStore

    if isinstance(store, MemoryStore):
        return _memory_dump(store)
    if hasattr(store, "engine") and hasattr(store, "namespace"):
        return _sql_dump(store)
    return _protocol_dump(store)
