"""``put_routines``' checked input: many registrations written in one transaction, every backend alike."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from alma_schedule.errors import InvalidInput
from alma_schedule.model import Routine
from alma_schedule.stores.arguments import PutRoutineArgs, RKey, put_routine_args
from alma_schedule.stores.validation import check_text

__all__ = ["put_routines_args"]


def put_routines_args(
    routines: Sequence[tuple[Routine, str | None]], now: datetime
) -> list[tuple[Routine, PutRoutineArgs, str | None]]:
    """``put_routines``: each pair ``(routine, expected_revision)`` checked as ``put_routine``'s, and
    no routine twice (:class:`InvalidInput` naming it), before anything is written."""
    if isinstance(routines, (str, bytes)) or not isinstance(routines, Sequence):
        raise InvalidInput(f"put_routines takes a list of (routine, expected_revision), not {type(routines).__name__}")
    out: list[tuple[Routine, PutRoutineArgs, str | None]] = []
    seen: set[RKey] = set()
    for pair in routines:
        if not isinstance(pair, tuple) or len(pair) != 2:
            raise InvalidInput("put_routines takes pairs (routine, expected_revision)")
        routine, expected = pair
        if expected is not None and not isinstance(expected, str):
            raise InvalidInput(f"expected_revision must be text or None, not {type(expected).__name__}")
        args = put_routine_args(routine, now)
        check_text("paused_reason", routine.paused_reason)
        if args.key in seen:
            raise InvalidInput(f"put_routines: routine {routine.key} is given twice")
        seen.add(args.key)
        out.append((routine, args, expected))
    return out
