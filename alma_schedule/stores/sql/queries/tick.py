"""SQL statements of the store, the tick: due scan, batched cursor moves, supersession, run inserts, resends."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql as pg
from sqlalchemy.sql import ColumnElement

from alma_schedule.model import Reason, RunRecord, RunState
from alma_schedule.policies import backoff, limits, supersession
from alma_schedule.stores.sql.queries.buffered import EXPIRABLE, expirable
from alma_schedule.stores.sql.queries.common import (
    _KEY_COLS,
    Key3,
    Key4,
    Params,
    _arrays,
    _insert,
    _unnest,
    dt,
    end_runs_for_fires,
    in_states,
    lit,
)
from alma_schedule.stores.sql.rows import record_values
from alma_schedule.stores.sql.schema import routines, runs
from alma_schedule.stores.sql.types import UtcDateTime


def due_routine(now: datetime) -> ColumnElement[bool]:
    """A routine ``claim_due`` locks at ``now`` (also the tick probe's ``due``)."""
    return sa.and_(
        routines.c.next_due_at <= now,
        # not policies.backoff.held_back(defer_until, now), set-based
        sa.or_(routines.c.defer_until.is_(None), routines.c.defer_until <= now),
        routines.c.deleted_at.is_(None),
        routines.c.enabled.is_(True),
        routines.c.paused_reason.is_(None),
    )


def _not_in(keys: Sequence[Key3]) -> tuple[ColumnElement[bool], ...]:
    if not keys:
        return ()
    return (sa.tuple_(routines.c.org, routines.c.uid, routines.c.routine_id).not_in(list(keys)),)


def _planning_columns() -> list[Any]:
    """Every ``routines`` column in order, with the schedule as JSON text and no definition."""
    return [
        sa.cast(c, sa.Text).label(c.name)
        if c.name == "schedule"
        else sa.null().label(c.name)
        if c.name == "definition"
        else c
        for c in routines.c
    ]


def select_due(
    now: datetime,
    limit: int,
    *,
    lock: bool,
    wait: bool = False,
    besides: Sequence[Key3] = (),
    planning: bool = False,
) -> sa.Select[Any]:
    """Due routines, oldest ``next_due_at`` first, other than ``besides`` (those this claim already
    decided); skip rows a concurrent transaction holds, or (``wait``) wait for them, locking in this
    same order (two waiting claimers cannot deadlock). ``planning``: the columns of
    :func:`~alma_schedule.stores.sql.rows.planning_routine` (no definition, the schedule as text)."""
    stmt = (
        sa.select(*(_planning_columns() if planning else [routines]))
        .where(due_routine(now), *_not_in(besides))
        .order_by(routines.c.next_due_at, routines.c.org, routines.c.uid, routines.c.routine_id)
        .limit(limit)
    )
    return stmt.with_for_update(skip_locked=not wait, of=routines) if lock else stmt


def due_exists(now: datetime, besides: Sequence[Key3] = ()) -> sa.Select[Any]:
    """Whether a routine other than ``besides`` is due at ``now`` (no lock: after a short batch, such
    a row is one that a concurrent transaction held while the batch locked). The first such row in
    ``ix_routines_due`` order, ``LIMIT 1``, not ``EXISTS``: PostgreSQL drops the order of an
    ``EXISTS``, and statistics taken while many routines were due then plan a scan of the whole
    table for a row that is not there (as :mod:`.probe` explains)."""
    first: sa.Select[Any] = (
        sa.select(sa.literal_column("1"))
        .select_from(routines)
        .where(due_routine(now), *_not_in(besides))
        .order_by(routines.c.next_due_at)
        .limit(1)
    )
    return sa.select(first.scalar_subquery().is_not(None))


#: How long the claim of held due rows waits for one (PostgreSQL; a longer hold is left to the next tick).
HELD_LOCK_WAIT = sa.text("SET LOCAL lock_timeout = '2s'")


def _batch_update_routines(
    dialect: str,
    name: str,
    columns: Sequence[tuple[str, sa.types.TypeEngine[Any]]],
    rows: Sequence[Mapping[str, Any]],
    sets: Mapping[str, Any],
    consts: Mapping[str, Any],
    guard: Any = None,
    computed: Mapping[str, Any] | None = None,
) -> tuple[Any, Params]:
    """One UPDATE of many routine rows: ``sets`` maps a column to a row field name; ``computed``
    maps a column to a function of the row's fields (``k["field"]``) giving an expression."""
    more = computed or {}
    if dialect == "postgresql":
        k = _unnest(name, [*_KEY_COLS, *columns])
        stmt = (
            sa.update(routines)
            .values({**{c: k.c[f] for c, f in sets.items()}, **consts, **{c: fn(k.c) for c, fn in more.items()}})
            .where(
                routines.c.org == k.c.org,
                routines.c.uid == k.c.uid,
                routines.c.routine_id == k.c.routine_id,
            )
        )
        if guard is not None:
            stmt = stmt.where(guard(k.c))
        return stmt, _arrays(name, [c for c, _ in [*_KEY_COLS, *columns]], rows)
    b = {col: sa.bindparam(f"{name}_{col}", type_=typ) for col, typ in [*_KEY_COLS, *columns]}
    stmt = (
        sa.update(routines)
        .values({**{c: b[f] for c, f in sets.items()}, **consts, **{c: fn(b) for c, fn in more.items()}})
        .where(routines.c.org == b["org"], routines.c.uid == b["uid"], routines.c.routine_id == b["routine_id"])
    )
    if guard is not None:
        stmt = stmt.where(guard(b))
    return stmt, [{f"{name}_{k}": v for k, v in r.items()} for r in rows]


def advance_cursors(dialect: str, rows: Sequence[Mapping[str, Any]], now: datetime) -> tuple[Any, Params]:
    """Move each cursor to its fire (only forward: ``last_fire < fire``) and set ``next_due_at``."""
    return _batch_update_routines(
        dialect,
        "a",
        [("fire", UtcDateTime()), ("next_due_at", UtcDateTime())],
        rows,
        {"last_fire": "fire", "next_due_at": "next_due_at"},
        {**backoff.CLEAR.fields(), "updated_at": dt(now)},
        guard=lambda k: sa.or_(routines.c.last_fire.is_(None), routines.c.last_fire < k["fire"]),
    )


def count_claims(dialect: str, rows: Sequence[Mapping[str, Any]], now: datetime) -> tuple[Any, Params]:
    """``max_runs`` (:mod:`alma_schedule.policies.limits`, set-based): one more claimed schedule fire
    for each routine of ``rows`` (``{org, uid, routine_id, max_runs}``); the claim that reaches
    ``max_runs`` also clears ``next_due_at`` (the routine is finished), in the same statement."""
    counted = routines.c.schedule_claims + limits.CLAIM_STEP
    return _batch_update_routines(
        dialect,
        "m",
        [("max_runs", sa.Integer())],
        rows,
        {},
        {"schedule_claims": counted, "updated_at": dt(now)},
        computed={
            "next_due_at": lambda k: sa.case((counted >= k["max_runs"], sa.null()), else_=routines.c.next_due_at)
        },
    )


def move_due(dialect: str, rows: Sequence[Mapping[str, Any]], now: datetime) -> tuple[Any, Params]:
    """``NotDue``: only move the index."""
    return _batch_update_routines(
        dialect,
        "n",
        [("next_due_at", UtcDateTime())],
        rows,
        {"next_due_at": "next_due_at"},
        {"updated_at": dt(now)},
    )


def defer_batch(dialect: str, rows: Sequence[Mapping[str, Any]], now: datetime) -> tuple[Any, Params]:
    """``Defer``: the planning back-off (:func:`alma_schedule.policies.backoff.deferred`, set-based):
    ``defer_until``/``last_error`` from the row, ``error_count`` bumped by ``ERROR_STEP``."""
    return _batch_update_routines(
        dialect,
        "d",
        [("until", UtcDateTime()), ("error", sa.Text())],
        rows,
        {"defer_until": "until", "last_error": "error"},
        {"error_count": routines.c.error_count + backoff.ERROR_STEP, "updated_at": dt(now)},
    )


def supersede(dialect: str, fires: Sequence[Key4], now: datetime) -> tuple[Any, Params]:
    """Older schedule ``claimed`` runs of the routines of these fires -> ``skipped(missed)`` (CAS),
    returned, unless the fire's own run key exists (a duplicate supersedes nothing): the
    ``SUPERSEDE`` placement of :func:`alma_schedule.policies.supersession.place`, set-based."""
    state, reason = supersession.SUPERSEDED
    cas = sa.and_(
        runs.c.state == lit(supersession.SUPERSEDABLE_STATE), runs.c.origin == lit(supersession.SUPERSEDABLE_ORIGIN)
    )
    return end_runs_for_fires(dialect, "s", fires, state, reason, now, cas)


#: Run columns that differ between the rows one ``claim_due`` inserts; every other column has the
#: same value in all of them (``claimed_at = state_at = now``, zeros, empty lists, NULLs).
FIRE_VARYING: tuple[tuple[str, sa.types.TypeEngine[Any]], ...] = (
    ("org", sa.Text()),
    ("uid", sa.Text()),
    ("routine_id", sa.Text()),
    ("run_id", sa.Text()),
    ("state", sa.Text()),
    ("reason", sa.Text()),
    ("origin", sa.Text()),
    ("config_revision", sa.Text()),
    ("fire_at", UtcDateTime()),
    ("expires_at", UtcDateTime()),
    ("resend_at", UtcDateTime()),
    ("finished_at", UtcDateTime()),
    ("due_at", UtcDateTime()),  # jitter (issue 15): each fire's own due instant
)


def insert_runs(dialect: str, rows: Sequence[Mapping[str, Any]]) -> tuple[Any, Params]:
    """Insert run rows with an UNTARGETED ``ON CONFLICT DO NOTHING`` (a targeted one would raise on the
    partial unique index), returning the KEYS of the rows actually inserted. PostgreSQL: ONE
    ``INSERT ... SELECT FROM unnest(<arrays>)`` whatever the number of rows (columns outside
    :data:`FIRE_VARYING` are taken from the first row, and so are those equal in every row);
    SQLite: executemany."""
    if dialect != "postgresql":
        return _insert(dialect, runs).on_conflict_do_nothing().returning(*_PK), list(rows)
    return _insert_unnest({name: [r[name] for r in rows] for name, _ in FIRE_VARYING}, rows[0])


def insert_records(dialect: str, recs: Sequence[RunRecord]) -> tuple[Any, Params]:
    """:func:`insert_runs` of run records (read by attribute: no mapping per row)."""
    if dialect != "postgresql":
        return insert_runs(dialect, [record_values(r) for r in recs])
    columns = {name: [getattr(r, name) for r in recs] for name, _ in FIRE_VARYING}
    return _insert_unnest(columns, {c.name: getattr(recs[0], c.name) for c in runs.c})


_PK = (runs.c.org, runs.c.uid, runs.c.routine_id, runs.c.run_id)


def _insert_unnest(columns: Mapping[str, list[Any]], first: Mapping[str, Any]) -> tuple[Any, Params]:
    # Columns with one value in every row are bound once; the others travel as arrays.
    arrays = [(name, typ) for name, typ in FIRE_VARYING if any(v != columns[name][0] for v in columns[name])]
    u = _unnest("i", arrays)
    varying = {name for name, _ in arrays}
    values = [
        u.c[c.name] if c.name in varying else sa.cast(sa.bindparam(f"i_{c.name}", first[c.name], type_=c.type), c.type)
        for c in runs.c
    ]
    stmt = pg.insert(runs).from_select([c.name for c in runs.c], sa.select(*values)).on_conflict_do_nothing()
    return stmt.returning(*_PK), {f"i_{name}": columns[name] for name in varying}


def existing_runs(dialect: str, keys: Sequence[tuple[str, str, str, str]]) -> tuple[Any, Params]:
    """Which of these run keys exist (a fire claimed before is a duplicate: no row, no supersession)."""
    pk = (runs.c.org, runs.c.uid, runs.c.routine_id, runs.c.run_id)
    if dialect == "postgresql":
        k = _unnest("e", [*_KEY_COLS, ("run_id", sa.Text())])
        stmt = sa.select(*pk).join(
            k,
            sa.and_(
                runs.c.org == k.c.org,
                runs.c.uid == k.c.uid,
                runs.c.routine_id == k.c.routine_id,
                runs.c.run_id == k.c.run_id,
            ),
        )
        return stmt, {f"e_{c}": [key[i] for key in keys] for i, c in enumerate(("org", "uid", "routine_id", "run_id"))}
    return sa.select(*pk).where(sa.tuple_(*pk).in_(list(keys))), {}


ORDER_TAIL = (runs.c.fire_at, runs.c.run_id, runs.c.org, runs.c.uid, runs.c.routine_id)


def _backoff_case(column: sa.Column[Any], pushes: Sequence[datetime], cap: datetime) -> Any:
    """``pushes[i]`` when ``column`` (attempts before this one) is ``i``, else ``cap``."""
    if not pushes:
        return dt(cap)
    return sa.case({i: dt(p) for i, p in enumerate(pushes)}, value=column, else_=dt(cap))


def takeable(column: sa.Column[Any], state: str, now: datetime, *, live: bool = False) -> ColumnElement[bool]:
    """A run a take of ``column`` (``resend_at``: live claimed runs; ``next_poll_at``: submitted
    runs) would take at ``now`` (also the tick probe's ``resends`` and ``polls``)."""
    where = sa.and_(runs.c.state == lit(state), column <= now)
    return sa.and_(where, runs.c.expires_at > now) if live else where


def _take(column: sa.Column[Any], state: str, now: datetime, limit: int, *, live: bool = False) -> sa.Select[Any]:
    stmt = sa.select(runs.c.org, runs.c.uid, runs.c.routine_id, runs.c.run_id).where(
        takeable(column, state, now, live=live)
    )
    return stmt.order_by(column, *ORDER_TAIL).limit(limit).with_for_update(skip_locked=True)


def _pk_in(sub: sa.Select[Any]) -> ColumnElement[bool]:
    return sa.tuple_(runs.c.org, runs.c.uid, runs.c.routine_id, runs.c.run_id).in_(sub)


def _expiring(now: datetime, limit: int) -> sa.Select[Any]:
    return (
        sa.select(runs.c.org, runs.c.uid, runs.c.routine_id, runs.c.run_id)
        .where(expirable(now))
        .order_by(runs.c.expires_at, *ORDER_TAIL)
        .limit(limit)
        .with_for_update(skip_locked=True)
    )


def expire_claimed(now: datetime, limit: int) -> Any:
    """``claimed`` (and ``buffered``) rows past ``expires_at`` -> ``skipped(missed)`` (skip-locked, returned)."""
    return (
        sa.update(runs)
        .where(_pk_in(_expiring(now, limit)), in_states(*EXPIRABLE))
        .values(state=lit(RunState.SKIPPED), reason=lit(Reason.MISSED), state_at=dt(now), finished_at=dt(now))
        .returning(*runs.c)
    )


def peek_expiring(now: datetime, limit: int) -> sa.Select[Any]:
    """Read-only: what :func:`expire_claimed` would expire (same predicate, same order)."""
    return sa.select(runs).where(expirable(now)).order_by(runs.c.expires_at, *ORDER_TAIL).limit(limit)


def take_resends(now: datetime, limit: int, pushes: Sequence[datetime], cap: datetime) -> Any:
    """Take ``claimed`` rows past ``resend_at`` and push ``resend_at`` back in the same statement."""
    return (
        sa.update(runs)
        .where(
            _pk_in(_take(runs.c.resend_at, RunState.CLAIMED, now, limit, live=True)),
            runs.c.state == lit(RunState.CLAIMED),
        )
        .values(
            send_attempts=runs.c.send_attempts + 1,
            resend_at=_backoff_case(runs.c.send_attempts, pushes, cap),
        )
        .returning(*runs.c)
    )


def take_polls(now: datetime, limit: int, pushes: Sequence[datetime], cap: datetime) -> Any:
    """Take ``submitted`` rows past ``next_poll_at`` and push it back in the same statement."""
    return (
        sa.update(runs)
        .where(
            _pk_in(_take(runs.c.next_poll_at, RunState.SUBMITTED, now, limit)),
            runs.c.state == lit(RunState.SUBMITTED),
        )
        .values(
            poll_attempts=runs.c.poll_attempts + 1,
            next_poll_at=_backoff_case(runs.c.poll_attempts, pushes, cap),
        )
        .returning(*runs.c)
    )


def set_next_polls(polls: Mapping[Any, datetime]) -> tuple[Any, list[dict[str, Any]]]:
    """``next_poll_at`` of a few submitted runs (keyed by ``RunKey``), one executemany."""
    stmt = (
        sa.update(runs)
        .where(
            runs.c.org == sa.bindparam("k_org"),
            runs.c.uid == sa.bindparam("k_uid"),
            runs.c.routine_id == sa.bindparam("k_routine_id"),
            runs.c.run_id == sa.bindparam("k_run_id"),
            runs.c.state == lit(RunState.SUBMITTED),
        )
        .values(next_poll_at=sa.bindparam("k_next_poll_at", type_=UtcDateTime()))
    )
    params = [
        {"k_org": k.org, "k_uid": k.uid, "k_routine_id": k.routine_id, "k_run_id": k.run_id, "k_next_poll_at": at}
        for k, at in polls.items()
    ]
    return stmt, params


def peek_runs(column: sa.Column[Any], state: str, now: datetime, limit: int, *, live: bool = False) -> sa.Select[Any]:
    """Read-only: what the matching take would take (same predicate, same order)."""
    stmt = sa.select(runs).where(runs.c.state == lit(state), column <= now)
    if live:
        stmt = stmt.where(runs.c.expires_at > now)
    return stmt.order_by(column, *ORDER_TAIL).limit(limit)
