"""SQL statements of the store, the start: the ``claimed -> running`` CAS and ``max_runs``' count of it.
docs/architecture.md, section "The modules, in detail" (stores/sql/queries/start.py).
"""

from __future__ import annotations

import functools
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.functions import FunctionElement

from alma_schedule.model import RunState
from alma_schedule.policies.limits import COUNTED_ORIGIN, START_STEP
from alma_schedule.stores.sql.queries.common import lit, owned_states
from alma_schedule.stores.sql.queries.runs import _RUN_KEY
from alma_schedule.stores.sql.schema import routines, runs
from alma_schedule.stores.sql.types import UtcDateTime

__all__ = ["COUNT_START", "SELECT_RUN_WITH_ROUTINE", "limit_of", "start_cas"]

_ROUTINE_OF_RUN = sa.and_(
    routines.c.org == runs.c.org, routines.c.uid == runs.c.uid, routines.c.routine_id == runs.c.routine_id
)
_ROUTINE_KEY = sa.and_(
    routines.c.org == sa.bindparam("k_org"),
    routines.c.uid == sa.bindparam("k_uid"),
    routines.c.routine_id == sa.bindparam("k_routine_id"),
)
_NOW = sa.bindparam("now", type_=UtcDateTime)
_COUNTED = lit(COUNTED_ORIGIN)


class _MaxRuns(FunctionElement[Any]):
    """``max_runs`` of a schedule JSON column, compiled per dialect (its JSON functions differ)."""

    type = sa.Numeric()
    name = "max_runs"
    inherit_cache = True


@compiles(_MaxRuns)
def _max_runs_json1(element: _MaxRuns, compiler: Any, **kw: Any) -> str:
    """SQLite's JSON1: ``json_type`` / ``json_extract`` of ``$.max_runs``."""
    (schedule,) = element.clauses
    path: Any = sa.literal_column("'$.max_runs'")
    number = sa.func.json_type(schedule, path).in_([sa.literal_column("'integer'"), sa.literal_column("'real'")])
    return str(compiler.process(sa.case((number, sa.func.json_extract(schedule, path)), else_=sa.null()), **kw))


@compiles(_MaxRuns, "postgresql")
def _max_runs_jsonb(element: _MaxRuns, compiler: Any, **kw: Any) -> str:
    """PostgreSQL's ``jsonb``: ``jsonb_typeof`` / ``->>`` of ``max_runs``."""
    (schedule,) = element.clauses
    key: Any = sa.literal_column("'max_runs'")
    number = sa.func.jsonb_typeof(schedule.op("->")(key)) == sa.literal_column("'number'")
    return str(compiler.process(sa.case((number, sa.cast(schedule.op("->>")(key), sa.Numeric)), else_=sa.null()), **kw))


def limit_of() -> Any:
    """The routine's ``max_runs`` from its schedule JSON: a JSON number, else NULL (no limit), on
    every dialect (SQLAlchemy's ``compiles`` hooks)."""
    return _MaxRuns(routines.c.schedule)


@functools.lru_cache(maxsize=4)
def start_cas(*, with_routine: bool, in_window: bool) -> Any:
    """``claimed -> running`` joined to an ACTIVE routine row, guarded by ``max_runs``; ``in_window``:
    only while ``expires_at > now``. Params: key, ``now``, ``owner`` (the run's owner, None allowed).
    Returns the run row; ``with_routine`` (PostgreSQL: the one statement above; SQLite's
    ``RETURNING`` cannot name the joined table) then every ``routines`` column in order, as the
    count left it: the start returns all the runner needs in its one round trip. Built once per shape."""
    limit = limit_of()
    guards = [
        _RUN_KEY,
        # not the literal (owned_states): with it, a plan cached while few runs were claimed read a
        # burst's claimed runs through ix_runs_expires filtered by key, at each start
        *owned_states(RunState.CLAIMED),
        _ROUTINE_OF_RUN,
        routines.c.deleted_at.is_(None),
        routines.c.enabled.is_(True),
        routines.c.paused_reason.is_(None),
    ]
    if in_window:
        guards.append(runs.c.expires_at > _NOW)
    owner = sa.bindparam("owner", type_=sa.Text)
    stmt = sa.update(runs).values(state=lit(RunState.RUNNING), started_at=_NOW, state_at=_NOW, owner=owner)
    if not with_routine:
        under = sa.or_(limit.is_(None), routines.c.schedule_starts < limit)
        return stmt.where(*guards, sa.or_(runs.c.origin != _COUNTED, under)).returning(*runs.c)
    lock = (
        sa.select(routines.c.schedule_starts.label("starts"), limit.label("lim"))
        .where(_ROUTINE_KEY, limit.is_not(None))
        .with_for_update()
        .cte("start_lock")
    )
    under = sa.func.coalesce(sa.select(lock.c.starts < lock.c.lim).scalar_subquery(), sa.true())
    counts = sa.case((runs.c.origin == _COUNTED, sa.select(lock.c.lim).scalar_subquery()), else_=sa.null())
    joined = [c.label(f"r_{c.name}") for c in routines.c]
    started = (
        stmt.where(*guards, sa.or_(runs.c.origin != _COUNTED, under))
        .returning(*runs.c, *joined, counts.label("s_limit"))
        .cte("started")
    )
    step = routines.c.schedule_starts + START_STEP
    counted = (
        sa.update(routines)
        .where(
            routines.c.org == started.c.org,
            routines.c.uid == started.c.uid,
            routines.c.routine_id == started.c.routine_id,
            started.c.s_limit.is_not(None),
        )
        .values(
            schedule_starts=step,
            next_due_at=sa.case((step >= started.c.s_limit, sa.null()), else_=routines.c.next_due_at),
            updated_at=_NOW,
        )
        .returning(routines.c.schedule_starts, routines.c.next_due_at, routines.c.updated_at)
        .cte("counted")
    )

    def after_count(name: str) -> Any:
        if name in ("schedule_starts", "next_due_at", "updated_at"):
            return sa.case((counted.c.schedule_starts.is_not(None), counted.c[name]), else_=started.c[f"r_{name}"])
        return started.c[f"r_{name}"]

    return sa.select(*(started.c[c.name] for c in runs.c), *(after_count(c.name) for c in routines.c)).select_from(
        started.outerjoin(counted, sa.true())
    )


#: SQLite, after a won start of a counted run (same transaction): one more start, the index cleared
#: at the limit. Params: the routine key (``k_*``), ``now``. Returns the routine.
_STEP = routines.c.schedule_starts + START_STEP
COUNT_START = (
    sa.update(routines)
    .where(_ROUTINE_KEY, limit_of().is_not(None))
    .values(
        schedule_starts=_STEP,
        next_due_at=sa.case((_STEP >= limit_of(), sa.null()), else_=routines.c.next_due_at),
        updated_at=_NOW,
    )
    .returning(*routines.c)
)

#: The portable start's first statement: the routine row locked when it has a ``max_runs`` (a no-op
#: on SQLite, whose writers are serialized), so concurrent counted starts of one routine take turns
#: (lock order routine -> run, as the skip). Params: the routine key (``k_*``).
LOCK_COUNTED_ROUTINE = (
    sa.select(routines.c.schedule_starts).where(_ROUTINE_KEY, limit_of().is_not(None)).with_for_update()
)

#: The run and its routine's levers and ``max_runs`` count (the routine may be gone: outer join).
#: Params: the key.
SELECT_RUN_WITH_ROUTINE = (
    sa.select(
        runs,
        routines.c.deleted_at.label("r_deleted_at"),
        routines.c.enabled.label("r_enabled"),
        routines.c.paused_reason.label("r_paused_reason"),
        routines.c.routine_id.label("r_exists"),
        routines.c.schedule_starts.label("r_schedule_starts"),
        routines.c.schedule.label("r_schedule"),
    )
    .select_from(runs.outerjoin(routines, _ROUTINE_OF_RUN))
    .where(_RUN_KEY)
)
