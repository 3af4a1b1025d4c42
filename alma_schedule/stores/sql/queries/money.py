"""SQL statements of the store, money: the spend rows (reserve, settle, read)."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from alma_schedule.stores.sql.queries.common import _insert
from alma_schedule.stores.sql.schema import spend


def reserve_upsert(dialect: str, ceiling: str, day: str, amount: int, limit: int) -> Any:
    """Add ``amount`` to a ceiling's day unless that would exceed ``limit`` (no row returned then):
    :func:`alma_schedule.policies.settlement.fits`, in the upsert's guard (atomic under concurrency)."""
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
