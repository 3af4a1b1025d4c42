"""``max_runs``: limited actions, counted in the claim transaction (issue 15).

``routines.schedule_claims`` goes up by :data:`CLAIM_STEP` for each ``claimed`` schedule row the
claim transaction inserts for a routine that has ``max_runs`` (decide passes the limit on the
``Fire``). Skipped inserts (``overlap``, ``missed``), manual runs and backfill runs never count,
and nothing is given back (a claimed fire that then fails, or is superseded, still counted). The
statement that counts the claim that reaches the limit also clears ``next_due_at``: the routine is
finished (:func:`alma_schedule.policies.finished.finished_reason`). Re-registration may change
``max_runs`` and keeps the count.

The memory store calls :func:`count_claim`; the SQL store's batched UPDATE is the same rule,
set-based (``schedule_claims + CLAIM_STEP >= max_runs``).
"""

from __future__ import annotations

__all__ = ["CLAIM_STEP", "count_claim"]

CLAIM_STEP = 1


def count_claim(claims: int, max_runs: int) -> tuple[int, bool]:
    """The count after one more claimed schedule fire, and whether the routine is now finished."""
    counted = claims + CLAIM_STEP
    return counted, counted >= max_runs
