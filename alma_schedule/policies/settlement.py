"""Money: reserving against daily ceilings and settling a run's reservation.

docs/architecture.md, section "The modules, in detail" (policies/settlement.py).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

__all__ = ["Move", "Settlement", "finish_cost", "fits", "release", "settle"]


@dataclass(frozen=True, slots=True)
class Move:
    """Money moved on one ceiling-day: ``reserved_delta`` (<= 0) and ``settled_delta``."""

    ceiling: str
    reserved_delta: int
    settled_delta: int

    @property
    def spend_delta(self) -> int:
        """The change of the ceiling-day's spend (reserved plus settled)."""
        return self.reserved_delta + self.settled_delta


@dataclass(frozen=True, slots=True)
class Settlement:
    """The spend moves on ``day`` and whether the run row's reservation is cleared."""

    day: str | None
    moves: tuple[Move, ...]

    @property
    def clears(self) -> bool:
        """Whether the run row changes (``reserved_micros`` 0, ``reserve_ceilings`` empty)."""
        return bool(self.moves)

    def run_values(self) -> dict[str, Any]:
        """The run row's new reservation columns (empty when nothing is settled)."""
        return {"reserved_micros": 0, "reserve_ceilings": ()} if self.clears else {}


def finish_cost(result_cost: int | None, recorded_cost: int) -> int:
    """The cost a ``finish`` settles to: the result's, else the one recorded on the run."""
    return recorded_cost if result_cost is None else result_cost


def settle(reserved_micros: int, reserve_day: str | None, reserve_ceilings: Collection[str], cost: int) -> Settlement:
    """Move a run's reservation (``reserved_micros`` on ``reserve_ceilings`` for ``reserve_day``)
    to ``cost`` on every ceiling. Nothing when the run holds no reservation."""
    if not reserve_ceilings or reserve_day is None:
        return Settlement(reserve_day, ())
    return Settlement(reserve_day, tuple(Move(c, -reserved_micros, cost) for c in sorted(reserve_ceilings)))


def release(reserved_micros: int, reserve_day: str | None, reserve_ceilings: Collection[str]) -> Settlement:
    """Give the whole reservation back: :func:`settle` to 0."""
    return settle(reserved_micros, reserve_day, reserve_ceilings, 0)


def fits(spent: int, amount: int, limit: int) -> bool:
    """Whether reserving ``amount`` more on a ceiling-day that has ``spent`` stays within ``limit``."""
    return spent + amount <= limit
