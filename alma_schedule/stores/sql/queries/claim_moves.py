"""SQL statements of the store, ``claim_due``: the batched moves of the routine rows other than the
cursors' (:mod:`.claim`): ``NotDue``'s index moves, ``Defer``'s back-off and the count of claims of
limited routines (``schedule_claims``: information only; ``max_runs`` counts starts, :mod:`.start`).
docs/architecture.md, section "The modules, in detail" (stores/sql/queries/claim_moves.py).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from alma_schedule.policies import backoff, limits
from alma_schedule.stores.sql.queries.claim import _NOW, _batch_params, _update_stmt
from alma_schedule.stores.sql.queries.common import Params
from alma_schedule.stores.sql.schema import routines
from alma_schedule.stores.sql.types import UtcDateTime

__all__ = ["count_claims", "count_params", "count_statement", "defer_batch", "move_due"]


@functools.lru_cache(maxsize=4)
def _count(dialect: str) -> Any:
    return count_statement(dialect)


def count_statement(dialect: str, guard: Callable[[Any], Any] | None = None) -> Any:
    """The UPDATE of :func:`count_claims` (``guard``: a further condition on each row's fields ``k``)."""
    counted = routines.c.schedule_claims + limits.CLAIM_STEP
    return _update_stmt(
        dialect,
        "m",
        [("max_runs", sa.Integer())],
        {},
        {"schedule_claims": counted, "updated_at": _NOW},
        guard,
    )


def count_claims(dialect: str, rows: Sequence[Mapping[str, Any]], now: datetime) -> tuple[Any, Params]:
    """One more claimed schedule fire for each routine of ``rows`` (``{org, uid, routine_id,
    max_runs}``; :func:`alma_schedule.policies.limits.count_claim`, set-based). Information only:
    the index is cleared by the START that reaches ``max_runs`` (:mod:`.start`), never by a claim."""
    return _count(dialect), count_params(dialect, rows, now)


def count_params(dialect: str, rows: Sequence[Mapping[str, Any]], now: datetime) -> Params:
    """The parameters of :func:`count_claims`' UPDATE."""
    return _batch_params(dialect, "m", ("max_runs",), rows, now)


@functools.lru_cache(maxsize=4)
def _move(dialect: str) -> Any:
    columns = [("next_due_at", UtcDateTime())]
    return _update_stmt(dialect, "n", columns, {"next_due_at": "next_due_at"}, {"updated_at": _NOW})


def move_due(dialect: str, rows: Sequence[Mapping[str, Any]], now: datetime) -> tuple[Any, Params]:
    """``NotDue``: only move the index."""
    return _move(dialect), _batch_params(dialect, "n", ("next_due_at",), rows, now)


@functools.lru_cache(maxsize=4)
def _defer(dialect: str) -> Any:
    return _update_stmt(
        dialect,
        "d",
        [("until", UtcDateTime()), ("error", sa.Text())],
        {"defer_until": "until", "last_error": "error"},
        {"error_count": routines.c.error_count + backoff.ERROR_STEP, "updated_at": _NOW},
    )


def defer_batch(dialect: str, rows: Sequence[Mapping[str, Any]], now: datetime) -> tuple[Any, Params]:
    """``Defer``: the planning back-off (:func:`alma_schedule.policies.backoff.deferred`, set-based):
    ``defer_until``/``last_error`` from the row, ``error_count`` bumped by ``ERROR_STEP``."""
    return _defer(dialect), _batch_params(dialect, "d", ("until", "error"), rows, now)
