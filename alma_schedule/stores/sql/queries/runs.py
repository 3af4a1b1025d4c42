"""SQL statements of the store, runs: one row by key, the CAS transitions."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

import sqlalchemy as sa

from alma_schedule.model import RunKey, RunState
from alma_schedule.stores.sql.queries.common import Params, _insert, lit, owned_states
from alma_schedule.stores.sql.schema import runs
from alma_schedule.stores.sql.types import UtcDateTime

# The hot run statements are built ONCE (named bind parameters): SQLAlchemy then reuses the
# statement's memoized cache key and compiled form, and a start costs one round trip of work.
_RUN_KEY = sa.and_(
    runs.c.org == sa.bindparam("k_org"),
    runs.c.uid == sa.bindparam("k_uid"),
    runs.c.routine_id == sa.bindparam("k_routine_id"),
    runs.c.run_id == sa.bindparam("k_run_id"),
)


def run_params(key: RunKey, **extra: Any) -> dict[str, Any]:
    """The parameters naming one run in the statements below (plus ``extra``)."""
    return {"k_org": key.org, "k_uid": key.uid, "k_routine_id": key.routine_id, "k_run_id": key.run_id, **extra}


SELECT_RUN = sa.select(runs).where(_RUN_KEY)
SELECT_RUN_LOCKED = SELECT_RUN.with_for_update()


def insert_run(dialect: str, values: Mapping[str, Any]) -> Any:
    return _insert(dialect, runs).values(dict(values)).on_conflict_do_nothing().returning(*runs.c)


_NOW = sa.bindparam("now", type_=UtcDateTime)


@functools.lru_cache(maxsize=512)
def _cas(from_states: tuple[str, ...], columns: tuple[str, ...]) -> Any:
    return (
        sa.update(runs)
        .where(_RUN_KEY, *owned_states(*from_states))  # the run by a key index (owned_states)
        .values({c: sa.bindparam(f"v_{c}", type_=runs.c[c].type) for c in columns})
        .returning(*runs.c)
    )


def cas(key: RunKey, from_states: Sequence[str], values: Mapping[str, Any]) -> tuple[Any, Params]:
    """Compare-and-set one edge: the row moves only from one of ``from_states``; returned if it did.
    One statement per (edge, columns) shape, built once."""
    stmt = _cas(tuple(sorted(from_states)), tuple(sorted(values)))
    return stmt, run_params(key, **{f"v_{c}": v for c, v in values.items()})


# --- the blocked marker ---

#: Mark a ``running`` run blocked at once, in ONE statement (the first marker wins; the cost only
#: rises). Params: the key, ``now``, ``why``, ``cost`` (0 = leave the stored cost).
_COST = sa.bindparam("cost", type_=sa.BigInteger)
MARK_BLOCKED = (
    sa.update(runs)
    .where(_RUN_KEY, *owned_states(RunState.RUNNING))
    .values(
        blocked_at=sa.func.coalesce(runs.c.blocked_at, _NOW),
        blocked_why=sa.func.coalesce(runs.c.blocked_why, sa.bindparam("why", type_=sa.String)),
        cost_micros=sa.case((runs.c.cost_micros < _COST, _COST), else_=runs.c.cost_micros),
    )
)

# --- end the blocked marker ---


# --- the owner of a run ---

#: The ``running`` runs of one Celery request id (params ``owner``, ``prefix`` = the LIKE pattern
#: of ``owner + "/"`` with ``\\``, ``%`` and ``_`` escaped, ``limit``); key order. The caller keeps
#: only exact matches (SQLite's LIKE ignores ASCII case).
RUNNING_OF = (
    sa.select(runs)
    .where(
        runs.c.state == lit(RunState.RUNNING),
        runs.c.owner.is_not(None),
        sa.or_(
            runs.c.owner == sa.bindparam("owner", type_=sa.Text),
            runs.c.owner.like(sa.bindparam("prefix", type_=sa.Text), escape="\\"),
        ),
    )
    .order_by(runs.c.org, runs.c.uid, runs.c.routine_id, runs.c.run_id)
    .limit(sa.bindparam("limit", type_=sa.Integer))
)


def like_prefix(owner: str) -> str:
    """The LIKE pattern of "starts with ``owner/``" (``\\``, ``%``, ``_`` escaped)."""
    escaped = owner.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"{escaped}/%"


# --- end the owner of a run ---


_PK = (runs.c.org, runs.c.uid, runs.c.routine_id, runs.c.run_id)


def existing_runs(keys: Sequence[tuple[str, str, str, str]]) -> tuple[Any, Params]:
    """Which of these run keys exist (a fire claimed before is a duplicate: no row, no supersession);
    a row-value ``IN`` (PostgreSQL's arrays: :func:`alma_schedule.stores.postgres.queries.existing_runs`)."""
    return sa.select(*_PK).where(sa.tuple_(*_PK).in_(list(keys))), {}
