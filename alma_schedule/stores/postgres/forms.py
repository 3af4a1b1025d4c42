"""PostgreSQL's forms of portable statement builders (:mod:`alma_schedule.stores.sql.queries`,
registered with :func:`~alma_schedule.stores.sql.queries.forms.replaces`): arrays bound whole
through ``unnest``, row addresses (``ctid``) and LATERAL probes (docs/architecture.md, section
"The portable store and PostgreSQL's speed")."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql as pg
from sqlalchemy.sql import ColumnElement

from alma_schedule.model import Fire, Routine
from alma_schedule.policies import supersession
from alma_schedule.stores.sql.queries import claim, common, tick
from alma_schedule.stores.sql.queries.common import _KEY_COLS, Key4, Params, _arrays, _unnest, ctid, lit, rows_at
from alma_schedule.stores.sql.queries.forms import replaces
from alma_schedule.stores.sql.schema import routines, runs
from alma_schedule.stores.sql.types import UtcDateTime

POSTGRESQL = "postgresql"  # SQLAlchemy's name of the dialect


@replaces(common._end_fires, POSTGRESQL)
@functools.lru_cache(maxsize=32)
def _end_fires(
    dialect: str,
    name: str,
    state: str,
    reason: str,
    cas: Callable[[Any], ColumnElement[bool]],
    slot: Callable[[Any], ColumnElement[bool]],
    report: bool,
) -> Any:
    """Each routine's one run in its slot, probed by a LATERAL ``LIMIT 1`` through the slot's unique
    index, ended at its ``ctid`` (a TID scan) with the CAS kept on key and state; ``report``: every
    probed routine, ``matched``, then the row it became."""
    now = sa.bindparam(f"{name}_now", type_=UtcDateTime)
    values = {"state": lit(state), "reason": lit(reason), "state_at": now, "finished_at": now}
    twin = runs.alias(f"{name}_twin")
    k = _unnest(name, [*_KEY_COLS, ("run_id", sa.Text())])
    # Each routine's one run in its slot, probed through the slot's unique partial index
    # (LATERAL ... LIMIT 1: a subquery the planner keeps, run once per key), with whether it
    # matches ``cas`` computed there; then only the matching ones are checked for the fire's own
    # key and found by their primary key, the CAS being the state just read (a join condition:
    # no partial index matches it). Written so, the statement costs O(fires) whatever the open
    # runs: with a constant state in the UPDATE's WHERE (on ``runs``, or on the probe's state,
    # which the planner then infers for ``runs`` too) the planner, whose statistics take open
    # runs to be few, scans that state's index and hashes EVERY such run of the table per batch.
    # The probe also returns the row's ``ctid``, and the UPDATE reads only the rows at the
    # probed ctids (``ctid = ANY(ARRAY(...))``: a TID scan, one heap fetch per run to end),
    # joined to the probe by the key, the state kept as the CAS. Joined by the key alone, the
    # planner (1,000 keys, half taken to match; the ledger's row count stale, VACUUM's
    # estimate drifts: 9,415 for 101,200 rows, measured) hashed a sequential scan of the
    # WHOLE ledger per batch: 45 of a 1,000-fire tick's 141 ms at 100,000 routines. A run a
    # concurrent transaction updated since the probe is rechecked on its key and state, not
    # its ctid (PostgreSQL's TID scan does not recheck its TIDs), so the CAS is what it was.
    r = runs.alias(f"{name}_slot")
    one = (
        sa.select(ctid(r).label("ctid"), r.c.run_id, r.c.state, r.c.origin)
        .where(r.c.org == k.c.org, r.c.uid == k.c.uid, r.c.routine_id == k.c.routine_id, slot(r.c))
        .limit(sa.literal_column("1"))  # one by the unique index
        .lateral(f"{name}_one")
    )
    probed = (
        k.c.org, k.c.uid, k.c.routine_id, k.c.run_id.label("fire_run_id"),
        one.c.ctid.label("slot_ctid"), one.c.run_id, one.c.state,
    )  # fmt: skip
    found = (
        sa.select(*probed, cas(one.c).label("matched"))
        .select_from(k.join(one, sa.true()))
        .cte(f"{name}_ending")
        .prefix_with("MATERIALIZED")
    )
    fresh = ~sa.exists().where(
        twin.c.org == found.c.org,
        twin.c.uid == found.c.uid,
        twin.c.routine_id == found.c.routine_id,
        twin.c.run_id == found.c.fire_run_id,
    )
    at_found = (
        rows_at(runs, sa.select(found.c.slot_ctid).where(found.c.matched)),  # a TID scan of these alone
        runs.c.org == found.c.org,
        runs.c.uid == found.c.uid,
        runs.c.routine_id == found.c.routine_id,
        runs.c.run_id == found.c.run_id,
        runs.c.state == found.c.state,
    )
    ending = sa.update(runs).values(values).where(*at_found, found.c.matched, fresh).returning(*runs.c)
    if not report:
        return ending
    # ``report``: every routine's run in its slot, its key, whether it matched, then the row it
    # became (NULLs where it was not ended): the UPDATE as a data-modifying CTE, joined back.
    ended = ending.cte(f"{name}_ended")
    joined = found.outerjoin(
        ended,
        sa.and_(
            ended.c.org == found.c.org,
            ended.c.uid == found.c.uid,
            ended.c.routine_id == found.c.routine_id,
            ended.c.run_id == found.c.run_id,
        ),
    )
    return sa.select(found.c.org, found.c.uid, found.c.routine_id, found.c.matched, *ended.c).select_from(joined)


@replaces(common.end_fires_params, POSTGRESQL)
def end_fires_params(dialect: str, name: str, fires: Sequence[Key4], now: datetime) -> Params:
    """One array per key column."""
    cols = ("org", "uid", "routine_id", "run_id")
    return {f"{name}_now": now, **{f"{name}_{c}": [f[i] for f in fires] for i, c in enumerate(cols)}}


@replaces(claim.row_fields, POSTGRESQL)
def row_fields(dialect: str, name: str, columns: Sequence[tuple[str, sa.types.TypeEngine[Any]]]) -> Any:
    """The rows as ``unnest`` of one array per field (one statement whatever the rows)."""
    return _unnest(name, [*_KEY_COLS, *columns]).c


@replaces(claim._batch_params, POSTGRESQL)
def _batch_params(
    dialect: str, name: str, fields: Sequence[str], rows: Sequence[Mapping[str, Any]], now: datetime | None
) -> Params:
    """One array per field."""
    bound = {} if now is None else {"c_now": now}
    return {**_arrays(name, ["org", "uid", "routine_id", *fields], rows), **bound}


#: Arrays of instants a claim already checked aware UTC: ``timestamptz`` without
#: :class:`UtcDateTime`'s per-element bind check (the same SQL, the same cast).
CHECKED_INSTANT = sa.DateTime(timezone=True)


@replaces(claim._instant, POSTGRESQL)
def _instant(dialect: str) -> sa.types.TypeEngine[Any]:
    return CHECKED_INSTANT


class _Tid(sa.types.UserDefinedType[str]):
    """PostgreSQL's ``tid`` (a row version's address), only ever a cast target."""

    cache_ok = True

    def get_col_spec(self, **kw: Any) -> str:
        return "TID"


@functools.lru_cache(maxsize=2)
def _advance_at(counting: bool = False) -> Any:
    """The cursor moves reaching the rows at their addresses (:func:`.common.rows_at`: a TID scan;
    the addresses as ``ARRAY(SELECT unnest($n))``, whose size the planner does not see), the key
    still matched to each fire's values."""
    at = sa.cast(sa.bindparam("a_at", type_=pg.ARRAY(sa.Text)), pg.ARRAY(_Tid()))
    return claim._advance(POSTGRESQL, counting).where(rows_at(routines, sa.select(sa.func.unnest(at))))


@replaces(claim.advance_cursors, POSTGRESQL)
def advance_cursors(
    dialect: str,
    fires: Sequence[tuple[Routine, Fire]],
    now: datetime,
    at: Sequence[str] | None = None,
    counting: bool = False,
) -> tuple[Any, Params]:
    """The arrays read straight from the fires; with ``at``, each fire's routine row's ``ctid`` as
    the claim locked it (valid while this transaction holds the lock and has not updated the row)."""
    moves = {
        "a_org": [r.org for r, _ in fires],
        "a_uid": [r.uid for r, _ in fires],
        "a_routine_id": [r.routine_id for r, _ in fires],
        "a_fire": [f.fire_at for _, f in fires],
        "a_next_due_at": [f.next_due_at for _, f in fires],
        "c_now": now,
    }
    if counting:
        moves["a_missed"] = [f.fires_missed for _, f in fires]
    if at is None:
        return claim._advance(dialect, counting), moves
    return _advance_at(counting), {**moves, "a_at": list(at)}


@replaces(claim.supersede, POSTGRESQL)
def supersede(
    dialect: str,
    fires: Sequence[Key4],
    now: datetime,
    advancing: Sequence[tuple[Routine, Fire]] = (),
    at: Sequence[str] | None = None,
    counting: bool = False,
) -> tuple[Any, Params]:
    """With ``advancing``, the cursor moves ride in the same statement as a data-modifying CTE (run
    to completion whether or not read: one round trip; neither part reads what the other writes)."""
    state, reason = supersession.SUPERSEDED
    stmt, params = common.end_runs_for_fires(
        dialect, "s", fires, state, reason, now, claim._supersedable, common.open_slot, report=True
    )
    if not advancing:
        return stmt, params
    moved, moves = advance_cursors(dialect, advancing, now, at, counting)
    assert isinstance(params, Mapping) and isinstance(moves, Mapping)  # arrays: one mapping each
    return _advancing(stmt, moved), {**params, **moves}


@functools.lru_cache(maxsize=8)
def _advancing(stmt: Any, moved: Any) -> Any:
    return stmt.add_cte(moved.cte("a_advanced"))


@replaces(tick._pk_in, POSTGRESQL)
def _pk_in(dialect: str, sub: sa.Select[Any]) -> ColumnElement[bool]:
    """By the ``ctid`` of the rows ``sub`` locked (``ctid = ANY(ARRAY(...))``, a TID scan: one heap
    fetch per row taken): as a key ``IN`` (a semi-join) planned for a take of 1,000 rows, it hashed a
    sequential scan of the whole ledger."""
    return rows_at(runs, sub.with_only_columns(ctid(runs)))
