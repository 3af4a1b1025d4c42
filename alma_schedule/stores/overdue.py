"""The store's part of the "did not run" alarm (:class:`OverdueStore`, one of the protocols
:class:`~alma_schedule.stores.base.Store` joins): the overdue fires (a system read) and each
fire's alert delivery state (``overdue_alerts``: attempts, the lease of the task that posts it,
the 2xx). Which fire is overdue is :func:`alma_schedule.policies.overdue.overdue_fire`; the
backends only read its inputs.

docs/architecture.md, section "The modules, in detail" (stores/overdue.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol, runtime_checkable

from alma_schedule.errors import InvalidInput
from alma_schedule.model import Scope
from alma_schedule.model.overdue import AlertState, FireKey, OverdueFire
from alma_schedule.stores.validation import check_limit, check_routine_key, require_utc

__all__ = ["OverdueStore", "fire_key_args", "fires_args", "overdue_args"]


def fire_key_args(key: FireKey) -> FireKey:
    """``key`` checked: three ids and an aware-UTC instant (:class:`InvalidInput` otherwise)."""
    if not isinstance(key, tuple) or len(key) != 4:
        raise InvalidInput("fire key must be (org, uid, routine_id, fire_at)")
    org, uid, rid, fire_at = key
    org, uid, rid = check_routine_key(Scope(org, uid), rid)
    return (org, uid, rid, require_utc("fire_at", fire_at))


def fires_args(fires: Sequence[OverdueFire]) -> list[tuple[OverdueFire, FireKey]]:
    """Each fire with its checked key (:class:`InvalidInput` for anything but overdue fires)."""
    if isinstance(fires, str | bytes) or not isinstance(fires, Sequence):
        raise InvalidInput("fires must be a sequence of OverdueFire")
    out: list[tuple[OverdueFire, FireKey]] = []
    for fire in fires:
        if not isinstance(fire, OverdueFire):
            raise InvalidInput(f"fires must be OverdueFire, not {type(fire).__name__}")
        out.append((fire, fire_key_args(fire.fire_key)))
    return out


def overdue_args(now: datetime, limit: int) -> tuple[datetime, int]:
    return require_utc("now", now), check_limit("limit", limit)


@runtime_checkable
class OverdueStore(Protocol):
    def overdue(self, now: datetime, limit: int = 100) -> list[OverdueFire]:
        """System, ONE read transaction, bounded and indexed: the overdue fires at ``now`` (at most one
        per routine, :func:`~alma_schedule.policies.overdue.overdue_fire` over the live routines with
        ``expect``, read through the partial index ``ix_routines_expect``, and each one's
        :data:`~alma_schedule.policies.overdue.RECENT_RUNS` latest runs), in routine key order, at
        most ``limit``; each carries its alert's ``delivered_at``."""
        ...

    def take_alerts(self, fires: Sequence[OverdueFire], *, now: datetime, lease_until: datetime) -> list[OverdueFire]:
        """System, atomic per fire (compare-and-set): the fires whose alert must be sent now, each
        taken once across concurrent callers: a fire with no alert row gets one (one attempt, leased
        until ``lease_until``); an undelivered row whose lease has ended gets one more attempt and a
        new lease; a delivered row, or one still leased, is not taken."""
        ...

    def alert_state(self, key: FireKey) -> AlertState | None:
        """System read: the fire's alert row, None without one."""
        ...

    def alert_retry(self, key: FireKey, *, lease_until: datetime) -> bool:
        """System, ONE statement: an undelivered row gets one more attempt, leased until
        ``lease_until`` (its task retries itself by then). False, nothing written, otherwise."""
        ...

    def alert_delivered(self, key: FireKey, *, now: datetime) -> bool:
        """System, ONE statement: ``delivered_at = now`` once (the first 2xx wins; the fire is never
        posted again). True when this call wrote it."""
        ...
