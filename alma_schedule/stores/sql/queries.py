"""Every SQL statement of the store, as named builders (SQLAlchemy Core). No SQL lives elsewhere.

Builders return a statement, or ``(statement, parameters)`` for batched ones; the store only
executes them. Dialect differences are confined here: PostgreSQL batches through ``unnest`` of
array parameters (one statement text whatever the batch size, so plans and compiled forms are
cached) and ``FOR UPDATE SKIP LOCKED``; SQLite batches through ``executemany`` / row-value ``IN``
lists and needs no row locks (every write transaction is ``BEGIN IMMEDIATE``).

State predicates are rendered as SQL literals (never bound), matching the partial indexes of
:mod:`.schema`, so generic plans can use those indexes.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql as pg
from sqlalchemy.dialects import sqlite as sqlite_dialect
from sqlalchemy.sql import ColumnElement

from alma_schedule.contracts import RunKey
from alma_schedule.stores.sql.schema import heartbeat, routine_versions, routines, runs, spend
from alma_schedule.stores.sql.types import UtcDateTime

Params = Mapping[str, Any] | Sequence[Mapping[str, Any]]
Key3 = tuple[str, str, str]


def lit(value: str) -> ColumnElement[Any]:
    """A constant SQL string literal (our own constants only, never input)."""
    return sa.literal_column("'" + value.replace("'", "''") + "'")


def in_states(*states: str) -> ColumnElement[bool]:
    return runs.c.state.in_([lit(s) for s in states])


NON_TERMINAL = ("claimed", "running", "submitted", "collecting")
ACTIVE = ("running", "submitted", "collecting")
TERMINAL = ("completed", "failed", "refused", "skipped", "timed_out")


def _insert(dialect: str, table: sa.Table) -> Any:
    return (pg.insert if dialect == "postgresql" else sqlite_dialect.insert)(table)


def dt(value: datetime | None) -> sa.BindParameter[Any]:
    return sa.bindparam(None, value, type_=UtcDateTime)


def routine_pk(org: str, uid: str, routine_id: str) -> ColumnElement[bool]:
    return sa.and_(routines.c.org == org, routines.c.uid == uid, routines.c.routine_id == routine_id)


def _unnest(name: str, columns: Sequence[tuple[str, sa.types.TypeEngine[Any]]]) -> Any:
    """PostgreSQL: ``unnest(:name_a, :name_b, ...) AS name(a, b, ...)`` over array parameters."""
    args = [sa.bindparam(f"{name}_{col}", type_=pg.ARRAY(typ)) for col, typ in columns]
    return sa.func.unnest(*args).table_valued(*(sa.column(col, typ) for col, typ in columns)).render_derived(name=name)


def _arrays(name: str, columns: Sequence[str], rows: Sequence[Mapping[str, Any]]) -> dict[str, list[Any]]:
    return {f"{name}_{col}": [r[col] for r in rows] for col in columns}


_KEY_COLS: list[tuple[str, sa.types.TypeEngine[Any]]] = [
    ("org", sa.Text()),
    ("uid", sa.Text()),
    ("routine_id", sa.Text()),
]


# ---------------------------------------------------------------------------------- routines


def select_routine(org: str, uid: str, routine_id: str, *, lock: bool = False) -> sa.Select[Any]:
    stmt = sa.select(routines).where(routine_pk(org, uid, routine_id))
    return stmt.with_for_update() if lock else stmt


def insert_routine(values: Mapping[str, Any]) -> Any:
    return sa.insert(routines).values(dict(values)).returning(*routines.c)


def update_routine(org: str, uid: str, routine_id: str, values: Mapping[str, Any], *, live_only: bool = False) -> Any:
    where = routine_pk(org, uid, routine_id)
    if live_only:
        where = sa.and_(where, routines.c.deleted_at.is_(None))
    return sa.update(routines).where(where).values(dict(values)).returning(*routines.c)


def list_routines(org: str, uid: str, *, include_deleted: bool, limit: int, after: str | None) -> sa.Select[Any]:
    stmt = sa.select(routines).where(routines.c.org == org, routines.c.uid == uid)
    if not include_deleted:
        stmt = stmt.where(routines.c.deleted_at.is_(None))
    if after is not None:
        stmt = stmt.where(routines.c.routine_id > after)
    return stmt.order_by(routines.c.routine_id).limit(limit)


def iter_routines_page(
    after: tuple[str, str, str] | None, batch: int, *, active_only: bool = False, lock: bool = False
) -> sa.Select[Any]:
    """Keyset pagination in key order (never an OFFSET, never everything at once)."""
    stmt = sa.select(routines)
    if after is not None:
        stmt = stmt.where(sa.tuple_(routines.c.org, routines.c.uid, routines.c.routine_id) > sa.tuple_(*after))
    if active_only:
        stmt = stmt.where(
            routines.c.deleted_at.is_(None), routines.c.enabled.is_(True), routines.c.paused_reason.is_(None)
        )
    stmt = stmt.order_by(routines.c.org, routines.c.uid, routines.c.routine_id).limit(batch)
    return stmt.with_for_update() if lock else stmt


def latest_version(org: str, uid: str, routine_id: str) -> sa.Select[Any]:
    """The newest entry of a routine's version history (number and revision)."""
    v = routine_versions.c
    return (
        sa.select(v.version, v.config_revision)
        .where(v.org == org, v.uid == uid, v.routine_id == routine_id)
        .order_by(v.version.desc())
        .limit(1)
    )


def insert_version(values: Mapping[str, Any]) -> Any:
    return sa.insert(routine_versions).values(dict(values))


def select_versions(org: str, uid: str, routine_id: str) -> sa.Select[Any]:
    v = routine_versions.c
    return sa.select(routine_versions).where(v.org == org, v.uid == uid, v.routine_id == routine_id).order_by(v.version)


def select_open_run(org: str, uid: str, routine_id: str) -> sa.Select[Any]:
    """The routine's non-terminal run, if any (at most one: the partial unique index)."""
    return sa.select(runs).where(
        runs.c.org == org, runs.c.uid == uid, runs.c.routine_id == routine_id, in_states(*NON_TERMINAL)
    )


def list_inactive(limit: int) -> sa.Select[Any]:
    return (
        sa.select(routines)
        .where(
            routines.c.deleted_at.is_(None),
            sa.or_(routines.c.enabled.is_(False), routines.c.paused_reason.is_not(None)),
        )
        .order_by(routines.c.org, routines.c.uid, routines.c.routine_id)
        .limit(limit)
    )


def set_defer(org: str, uid: str, routine_id: str, until: datetime, error: str) -> Any:
    """Planning back-off of one live routine (no row returned when it is unknown or deleted)."""
    values: dict[str, Any] = {
        "defer_until": until,
        "last_error": error,
        "error_count": routines.c.error_count + 1,
    }
    return (
        sa.update(routines)
        .where(routine_pk(org, uid, routine_id), routines.c.deleted_at.is_(None))
        .values(values)
        .returning(routines.c.routine_id)
    )


# ---------------------------------------------------------------------------------- the tick


def select_due(now: datetime, limit: int, *, lock: bool) -> sa.Select[Any]:
    """Due routines, oldest ``next_due_at`` first; skip rows a concurrent claimer holds."""
    stmt = (
        sa.select(routines)
        .where(
            routines.c.next_due_at <= now,
            sa.or_(routines.c.defer_until.is_(None), routines.c.defer_until <= now),
            routines.c.deleted_at.is_(None),
            routines.c.enabled.is_(True),
            routines.c.paused_reason.is_(None),
        )
        .order_by(routines.c.next_due_at, routines.c.org, routines.c.uid, routines.c.routine_id)
        .limit(limit)
    )
    return stmt.with_for_update(skip_locked=True) if lock else stmt


def _batch_update_routines(
    dialect: str,
    name: str,
    columns: Sequence[tuple[str, sa.types.TypeEngine[Any]]],
    rows: Sequence[Mapping[str, Any]],
    sets: Mapping[str, Any],
    consts: Mapping[str, Any],
    guard: Any = None,
) -> tuple[Any, Params]:
    """One UPDATE of many routine rows: ``sets`` maps a column to a row field name."""
    if dialect == "postgresql":
        k = _unnest(name, [*_KEY_COLS, *columns])
        stmt = (
            sa.update(routines)
            .values({**{c: k.c[f] for c, f in sets.items()}, **consts})
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
        .values({**{c: b[f] for c, f in sets.items()}, **consts})
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
        {"defer_until": None, "last_error": None, "error_count": 0, "updated_at": dt(now)},
        guard=lambda k: sa.or_(routines.c.last_fire.is_(None), routines.c.last_fire < k["fire"]),
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
    """``Defer``: the planning back-off, error recorded, ``error_count`` bumped."""
    return _batch_update_routines(
        dialect,
        "d",
        [("until", UtcDateTime()), ("error", sa.Text())],
        rows,
        {"defer_until": "until", "last_error": "error"},
        {"error_count": routines.c.error_count + 1, "updated_at": dt(now)},
    )


def supersede(dialect: str, keys: Sequence[Key3], now: datetime) -> tuple[Any, Params]:
    """Older schedule ``claimed`` runs of these routines -> ``skipped(missed)`` (CAS), returned."""
    values = {"state": lit("skipped"), "reason": lit("missed"), "state_at": dt(now), "finished_at": dt(now)}
    cas = sa.and_(runs.c.state == lit("claimed"), runs.c.origin == lit("schedule"))
    if dialect == "postgresql":
        k = _unnest("s", _KEY_COLS)
        stmt = (
            sa.update(runs)
            .values(values)
            .where(runs.c.org == k.c.org, runs.c.uid == k.c.uid, runs.c.routine_id == k.c.routine_id, cas)
            .returning(*runs.c)
        )
        return stmt, {
            "s_org": [k_[0] for k_ in keys],
            "s_uid": [k_[1] for k_ in keys],
            "s_routine_id": [k_[2] for k_ in keys],
        }
    stmt = (
        sa.update(runs)
        .values(values)
        .where(sa.tuple_(runs.c.org, runs.c.uid, runs.c.routine_id).in_(list(keys)), cas)
        .returning(*runs.c)
    )
    return stmt, {}


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
)


def insert_runs(dialect: str, rows: Sequence[Mapping[str, Any]]) -> tuple[Any, Params]:
    """Insert run rows with an UNTARGETED ``ON CONFLICT DO NOTHING`` (a targeted one would raise on the
    partial unique index), returning the KEYS of the rows actually inserted. PostgreSQL: ONE
    ``INSERT ... SELECT FROM unnest(<arrays>)`` whatever the number of rows (columns outside
    :data:`FIRE_VARYING` are taken from the first row, and so are those equal in every row);
    SQLite: executemany."""
    pk = (runs.c.org, runs.c.uid, runs.c.routine_id, runs.c.run_id)
    if dialect != "postgresql":
        return _insert(dialect, runs).on_conflict_do_nothing().returning(*pk), list(rows)
    first = rows[0]
    # Columns with one value in every row are bound once; the others travel as arrays.
    same = {name for name, _ in FIRE_VARYING if all(r[name] == first[name] for r in rows)}
    arrays = [(name, typ) for name, typ in FIRE_VARYING if name not in same]
    u = _unnest("i", arrays)
    columns = [
        u.c[c.name]
        if any(c.name == name for name, _ in arrays)
        else sa.cast(sa.bindparam(f"i_{c.name}", first[c.name], type_=c.type), c.type)
        for c in runs.c
    ]
    stmt = (
        pg.insert(runs)
        .from_select([c.name for c in runs.c], sa.select(*columns))
        .on_conflict_do_nothing()
        .returning(*pk)
    )
    return stmt, _arrays("i", [name for name, _ in arrays], rows)


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


def _take(column: sa.Column[Any], state: str, now: datetime, limit: int, *, live: bool = False) -> sa.Select[Any]:
    stmt = sa.select(runs.c.org, runs.c.uid, runs.c.routine_id, runs.c.run_id).where(
        runs.c.state == lit(state), column <= now
    )
    if live:
        stmt = stmt.where(runs.c.expires_at > now)
    return stmt.order_by(column, *ORDER_TAIL).limit(limit).with_for_update(skip_locked=True)


def _pk_in(sub: sa.Select[Any]) -> ColumnElement[bool]:
    return sa.tuple_(runs.c.org, runs.c.uid, runs.c.routine_id, runs.c.run_id).in_(sub)


def expire_claimed(now: datetime, limit: int) -> Any:
    """``claimed`` rows past ``expires_at`` -> ``skipped(missed)`` (skip-locked, returned)."""
    return (
        sa.update(runs)
        .where(_pk_in(_take(runs.c.expires_at, "claimed", now, limit)), runs.c.state == lit("claimed"))
        .values(state=lit("skipped"), reason=lit("missed"), state_at=dt(now), finished_at=dt(now))
        .returning(*runs.c)
    )


def take_resends(now: datetime, limit: int, pushes: Sequence[datetime], cap: datetime) -> Any:
    """Take ``claimed`` rows past ``resend_at`` and push ``resend_at`` back in the same statement."""
    return (
        sa.update(runs)
        .where(_pk_in(_take(runs.c.resend_at, "claimed", now, limit, live=True)), runs.c.state == lit("claimed"))
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
        .where(_pk_in(_take(runs.c.next_poll_at, "submitted", now, limit)), runs.c.state == lit("submitted"))
        .values(
            poll_attempts=runs.c.poll_attempts + 1,
            next_poll_at=_backoff_case(runs.c.poll_attempts, pushes, cap),
        )
        .returning(*runs.c)
    )


def peek_runs(column: sa.Column[Any], state: str, now: datetime, limit: int, *, live: bool = False) -> sa.Select[Any]:
    """Read-only: what the matching take would take (same predicate, same order)."""
    stmt = sa.select(runs).where(runs.c.state == lit(state), column <= now)
    if live:
        stmt = stmt.where(runs.c.expires_at > now)
    return stmt.order_by(column, *ORDER_TAIL).limit(limit)


# ---------------------------------------------------------------------------------- runs


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


_ROUTINE_OF_RUN = sa.and_(
    routines.c.org == runs.c.org, routines.c.uid == runs.c.uid, routines.c.routine_id == runs.c.routine_id
)
_NOW = sa.bindparam("now", type_=UtcDateTime)

#: ``claimed -> running`` in ONE statement, joined to an ACTIVE routine row (params: key, ``now``).
START_CAS = (
    sa.update(runs)
    .values(state=lit("running"), started_at=_NOW, state_at=_NOW)
    .where(
        _RUN_KEY,
        runs.c.state == lit("claimed"),
        _ROUTINE_OF_RUN,
        routines.c.deleted_at.is_(None),
        routines.c.enabled.is_(True),
        routines.c.paused_reason.is_(None),
    )
    .returning(*runs.c)
)

#: The run and its routine's levers (the routine may be gone: outer join). Params: the key.
SELECT_RUN_WITH_ROUTINE = (
    sa.select(
        runs,
        routines.c.deleted_at.label("r_deleted_at"),
        routines.c.enabled.label("r_enabled"),
        routines.c.paused_reason.label("r_paused_reason"),
        routines.c.routine_id.label("r_exists"),
    )
    .select_from(runs.outerjoin(routines, _ROUTINE_OF_RUN))
    .where(_RUN_KEY)
)


@functools.lru_cache(maxsize=512)
def _cas(from_states: tuple[str, ...], columns: tuple[str, ...]) -> Any:
    return (
        sa.update(runs)
        .where(_RUN_KEY, in_states(*from_states))
        .values({c: sa.bindparam(f"v_{c}", type_=runs.c[c].type) for c in columns})
        .returning(*runs.c)
    )


def cas(key: RunKey, from_states: Sequence[str], values: Mapping[str, Any]) -> tuple[Any, Params]:
    """Compare-and-set one edge: the row moves only from one of ``from_states``; returned if it did.
    One statement per (edge, columns) shape, built once."""
    stmt = _cas(tuple(sorted(from_states)), tuple(sorted(values)))
    return stmt, run_params(key, **{f"v_{c}": v for c, v in values.items()})


# ---------------------------------------------------------------------------------- money


def reserve_upsert(dialect: str, ceiling: str, day: str, amount: int, limit: int) -> Any:
    """Add ``amount`` to a ceiling's day unless that would exceed ``limit`` (no row returned then)."""
    total = spend.c.reserved_micros + spend.c.settled_micros + amount
    return (
        _insert(dialect, spend)
        .values(ceiling_key=ceiling, day=day, reserved_micros=amount, settled_micros=0)
        .on_conflict_do_update(
            index_elements=[spend.c.ceiling_key, spend.c.day],
            set_={"reserved_micros": spend.c.reserved_micros + amount},
            where=total <= limit,
        )
        .returning(spend.c.reserved_micros)
    )


def spend_adjust(ceiling: str, day: str, reserved_delta: int, settled_delta: int) -> Any:
    """Move money of one ceiling-day between reserved and settled (never below zero reserved)."""
    return (
        sa.update(spend)
        .where(spend.c.ceiling_key == ceiling, spend.c.day == day)
        .values(
            reserved_micros=sa.case(
                (spend.c.reserved_micros + reserved_delta < 0, 0),
                else_=spend.c.reserved_micros + reserved_delta,
            ),
            settled_micros=spend.c.settled_micros + settled_delta,
        )
    )


def select_spend(ceiling: str, day: str) -> sa.Select[Any]:
    return sa.select(spend.c.reserved_micros + spend.c.settled_micros).where(
        spend.c.ceiling_key == ceiling, spend.c.day == day
    )


# ---------------------------------------------------------------------------------- reads


def list_runs(
    org: str,
    uid: str,
    *,
    routine_id: str | None,
    state: str | None,
    since: datetime | None,
    limit: int,
    before: tuple[datetime, str] | None,
) -> sa.Select[Any]:
    stmt = sa.select(runs).where(runs.c.org == org, runs.c.uid == uid)
    if routine_id is not None:
        stmt = stmt.where(runs.c.routine_id == routine_id)
    if state is not None:
        stmt = stmt.where(runs.c.state == state)
    if since is not None:
        stmt = stmt.where(runs.c.fire_at >= since)
    if before is not None:
        stmt = stmt.where(sa.tuple_(runs.c.fire_at, runs.c.run_id) < sa.tuple_(dt(before[0]), before[1]))
    return stmt.order_by(runs.c.fire_at.desc(), runs.c.run_id.desc(), runs.c.routine_id.desc()).limit(limit)


def last_completed_delivery(org: str, uid: str, routine_id: str) -> sa.Select[Any]:
    return (
        sa.select(runs)
        .where(
            runs.c.org == org,
            runs.c.uid == uid,
            runs.c.routine_id == routine_id,
            runs.c.state == lit("completed"),
            runs.c.reason == lit("delivered"),
            runs.c.delivery_hash.is_not(None),
        )
        .order_by(runs.c.fire_at.desc(), runs.c.run_id.desc())
        .limit(1)
    )


def blocked(now: datetime, active_before: datetime, limit: int) -> sa.Select[Any]:
    return (
        sa.select(runs)
        .where(
            sa.or_(
                sa.and_(in_states("running", "collecting"), runs.c.state_at < active_before),
                sa.and_(runs.c.state == lit("submitted"), runs.c.deadline < now),
            )
        )
        .order_by(runs.c.state_at, *ORDER_TAIL)
        .limit(limit)
    )


def stuck(entered_before: datetime, limit: int) -> sa.Select[Any]:
    return (
        sa.select(runs)
        .where(in_states(*ACTIVE), runs.c.state_at < entered_before)
        .order_by(runs.c.state_at, *ORDER_TAIL)
        .limit(limit)
    )


# ---------------------------------------------------------------------------------- maintenance


def beat(dialect: str, now: datetime) -> Any:
    """Upsert the one heartbeat row; it never moves backwards."""
    ins = _insert(dialect, heartbeat).values(id=1, last_tick=now)
    return ins.on_conflict_do_update(
        index_elements=[heartbeat.c.id],
        set_={"last_tick": ins.excluded.last_tick},
        where=heartbeat.c.last_tick < ins.excluded.last_tick,
    )


def select_last_tick() -> sa.Select[Any]:
    return sa.select(heartbeat.c.last_tick).where(heartbeat.c.id == 1)


def prune(before: datetime) -> Any:
    return sa.delete(runs).where(in_states(*TERMINAL), runs.c.finished_at < before)


def purge_candidates(limit: int, *, lock: bool) -> sa.Select[Any]:
    """Tombstoned routines with no non-terminal run (locked, skipping rows others hold)."""
    open_run = (
        sa.select(sa.literal(1))
        .where(
            runs.c.org == routines.c.org,
            runs.c.uid == routines.c.uid,
            runs.c.routine_id == routines.c.routine_id,
            in_states(*NON_TERMINAL),
        )
        .exists()
    )
    stmt = (
        sa.select(routines.c.org, routines.c.uid, routines.c.routine_id)
        .where(routines.c.deleted_at.is_not(None), ~open_run)
        .order_by(routines.c.org, routines.c.uid, routines.c.routine_id)
        .limit(limit)
    )
    return stmt.with_for_update(skip_locked=True) if lock else stmt


def delete_of(table: sa.Table, keys: Sequence[Key3]) -> Any:
    return sa.delete(table).where(sa.tuple_(table.c.org, table.c.uid, table.c.routine_id).in_(list(keys)))


def erase_results(org: str, uid: str) -> Any:
    return (
        sa.update(runs)
        .where(runs.c.org == org, runs.c.uid == uid, runs.c.result_text.is_not(None))
        .values(result_text=None, erase_at=None)
    )


def erase_expired(now: datetime, limit: int) -> Any:
    due = (
        sa.select(runs.c.org, runs.c.uid, runs.c.routine_id, runs.c.run_id)
        .where(runs.c.erase_at <= now, runs.c.result_text.is_not(None))
        .order_by(runs.c.erase_at, *ORDER_TAIL)
        .limit(limit)
        .with_for_update(skip_locked=True)
    )
    return sa.update(runs).where(_pk_in(due)).values(result_text=None, erase_at=None)


def reindex_batch(dialect: str, rows: Sequence[Mapping[str, Any]], tzdata_version: str | None) -> tuple[Any, Params]:
    consts: dict[str, Any] = {}
    if tzdata_version is not None:
        consts["tzdata_version"] = tzdata_version
    return _batch_update_routines(
        dialect, "r", [("next_due_at", UtcDateTime())], rows, {"next_due_at": "next_due_at"}, consts
    )


_alembic_version = sa.table("alembic_version", sa.column("version_num", sa.String(32)))


def select_schema_version() -> sa.Select[Any]:
    """The Alembic revision the database is at (a missing table means: not migrated)."""
    return sa.select(_alembic_version.c.version_num).limit(1)


#: The key of the PostgreSQL advisory lock that serialises migrations (any constant bigint).
MIGRATION_LOCK_KEY = 0x616C6D615F6D6967  # "alma_mig"


def advisory_lock() -> Any:
    return sa.select(sa.func.pg_advisory_lock(sa.literal(MIGRATION_LOCK_KEY, sa.BigInteger)))


def advisory_unlock() -> Any:
    return sa.select(sa.func.pg_advisory_unlock(sa.literal(MIGRATION_LOCK_KEY, sa.BigInteger)))
