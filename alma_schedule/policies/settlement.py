"""Money: reserving against daily ceilings and settling a run's reservation
(``docs/architecture.md``, money).

A ``running`` run may hold ONE reservation: ``reserved_micros`` counted on every ceiling of
``reserve_ceilings`` for ``reserve_day``. It fits a ceiling when the ceiling-day's spend (reserved
plus settled) plus the amount stays within the limit (equal is allowed); it is all or nothing.

Ending the reservation moves it, on EVERY ceiling, from reserved to a settled cost:

* ``finish`` settles to the result's ``cost_micros``, or the run's recorded ``cost_micros`` when
  the result carries none;
* the operator's ``record`` settles AT THE RECORDED COST: the cost the operator gives (the run's
  ``cost_micros`` becomes it), else the run's stored ``cost_micros`` (an orphan that recorded
  nothing is thereby released; an uncertain run stored its whole bound, so it settles there);
* ``release`` settles to 0: the whole reservation is given back.

Per ceiling: reserved ``- reserved_micros``, settled ``+ cost`` (so the ceiling-day's spend moves
by ``cost - reserved_micros``). The run row then holds ``reserved_micros = 0`` and no ceilings
(``reserve_day`` is kept). A run that reserved against no ceiling settles nothing. Moves come in
ceiling-key order: the order a store locks spend rows in.
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
