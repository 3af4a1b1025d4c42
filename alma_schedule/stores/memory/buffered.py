"""Overlap ``latest`` in :class:`~alma_schedule.stores.memory.MemoryStore`: the routine's one buffered
fire (:mod:`alma_schedule.policies.overlap`).
docs/architecture.md, section "The modules, in detail" (stores/memory/buffered.py).
"""

from __future__ import annotations

import dataclasses
from datetime import datetime

from alma_schedule.errors import StoreConflict
from alma_schedule.model import RunRecord, RunState
from alma_schedule.policies import overlap

RKey = tuple[str, str, str]


class BufferedMixin:
    _runs: dict[RKey, dict[str, RunRecord]]
    _buffered: dict[RKey, str]

    def _put_run(self, rec: RunRecord) -> None:  # provided by RunsMixin
        raise NotImplementedError

    def _index_buffered(self, rk: RKey, rec: RunRecord) -> None:
        """Keep ``_buffered`` (at most ONE buffered row per routine) as ``rec`` is stored."""
        held = self._buffered.get(rk)
        if rec.state == RunState.BUFFERED:
            if held is not None and held != rec.run_id:
                raise StoreConflict(f"routine {rk} already has the buffered run {held}")
            self._buffered[rk] = rec.run_id
        elif held == rec.run_id:
            del self._buffered[rk]

    def _buffered_of(self, rk: RKey) -> RunRecord | None:
        held = self._buffered.get(rk)
        return None if held is None else self._runs[rk][held]

    def _replace_buffered(self, rk: RKey, now: datetime) -> RunRecord | None:
        """A newer fire replaces the routine's buffered row: ``skipped(overlap)``, returned."""
        rec = self._buffered_of(rk)
        if rec is None:
            return None
        state, reason = overlap.REPLACED
        gone = dataclasses.replace(rec, state=state, reason=reason, state_at=now, finished_at=now)
        self._put_run(gone)
        return gone

    def _release_buffered(self, rk: RKey, now: datetime, *, resend_at: datetime | None = None) -> RunRecord | None:
        """The routine's open run just ended at ``now``: its buffered row -> ``claimed`` (returned, to
        be sent after the step), or ``skipped(missed)`` past its window (None returned)."""
        rec = self._buffered_of(rk)
        if rec is None:
            return None
        state, reason = overlap.release(rec.expires_at, now)
        if state != RunState.CLAIMED:
            self._put_run(dataclasses.replace(rec, state=state, reason=reason, state_at=now, finished_at=now))
            return None
        due = resend_at if resend_at is not None else overlap.released_resend_at(rec.resend_at, rec.claimed_at, now)
        out = dataclasses.replace(rec, state=RunState.CLAIMED, state_at=now, resend_at=due)
        self._put_run(out)
        return out
