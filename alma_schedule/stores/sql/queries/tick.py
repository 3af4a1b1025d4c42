"""SQL statements of the store, the tick's sweeps: resends, expiries and polls (``claim_due``'s
statements are in :mod:`.claim`; ``due_routine`` is re-exported here for the tick probe)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.sql import ColumnElement

from alma_schedule.model import Reason, RunState
from alma_schedule.stores.sql.queries.buffered import EXPIRABLE, expirable
from alma_schedule.stores.sql.queries.claim import _batch_update_routines, due_routine
from alma_schedule.stores.sql.queries.common import dt, in_states, lit
from alma_schedule.stores.sql.queries.forms import replaceable
from alma_schedule.stores.sql.schema import runs
from alma_schedule.stores.sql.types import UtcDateTime

__all__ = [
    "ORDER_TAIL",
    "_batch_update_routines",
    "due_routine",
    "expire_claimed",
    "peek_expiring",
    "peek_runs",
    "set_next_polls",
    "take_polls",
    "take_resends",
    "takeable",
]

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


@replaceable
def _pk_in(dialect: str, sub: sa.Select[Any]) -> ColumnElement[bool]:
    """The ``runs`` rows ``sub`` (a select of their keys, locking them) selects: the key ``IN``."""
    return sa.tuple_(runs.c.org, runs.c.uid, runs.c.routine_id, runs.c.run_id).in_(sub)


def _expiring(now: datetime, limit: int) -> sa.Select[Any]:
    return (
        sa.select(runs.c.org, runs.c.uid, runs.c.routine_id, runs.c.run_id)
        .where(expirable(now))
        .order_by(runs.c.expires_at, *ORDER_TAIL)
        .limit(limit)
        .with_for_update(skip_locked=True)
    )


def expire_claimed(now: datetime, limit: int, dialect: str) -> Any:
    """``claimed`` (and ``buffered``) rows past ``expires_at`` -> ``skipped(missed)`` (skip-locked, returned)."""
    return (
        sa.update(runs)
        .where(_pk_in(dialect, _expiring(now, limit)), in_states(*EXPIRABLE))
        .values(state=lit(RunState.SKIPPED), reason=lit(Reason.MISSED), state_at=dt(now), finished_at=dt(now))
        .returning(*runs.c)
    )


def peek_expiring(now: datetime, limit: int) -> sa.Select[Any]:
    """Read-only: what :func:`expire_claimed` would expire (same predicate, same order)."""
    return sa.select(runs).where(expirable(now)).order_by(runs.c.expires_at, *ORDER_TAIL).limit(limit)


def take_resends(now: datetime, limit: int, pushes: Sequence[datetime], cap: datetime, dialect: str) -> Any:
    """Take ``claimed`` rows past ``resend_at`` and push ``resend_at`` back in the same statement."""
    return (
        sa.update(runs)
        .where(
            _pk_in(dialect, _take(runs.c.resend_at, RunState.CLAIMED, now, limit, live=True)),
            runs.c.state == lit(RunState.CLAIMED),
        )
        .values(
            send_attempts=runs.c.send_attempts + 1,
            resend_at=_backoff_case(runs.c.send_attempts, pushes, cap),
        )
        .returning(*runs.c)
    )


def take_polls(now: datetime, limit: int, pushes: Sequence[datetime], cap: datetime, dialect: str) -> Any:
    """Take ``submitted`` rows past ``next_poll_at`` and push it back in the same statement."""
    return (
        sa.update(runs)
        .where(
            _pk_in(dialect, _take(runs.c.next_poll_at, RunState.SUBMITTED, now, limit)),
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
