"""The fleet's bounded listings for the dashboard: routines and runs across the scopes a user may
see, keyset-paged on indexed keys, each listing reading at most :data:`BUDGET` rows per table.

Routines are read in primary-key order (``Store.fleet_routines``: the whole fleet, an org or a
scope); runs scope by scope, each scope newest first (``Store.list_runs``: ``ix_runs_scope_key``,
or ``ix_runs_routine_fire`` for one routine). Filters no index serves (kind, state, reason, an id
prefix across scopes) are applied to the rows read: when :data:`BUDGET` rows were read before a
page filled, the listing stops and says so (``stopped``), with the key to read on from.

docs/architecture.md, section "The modules, in detail" (dashboard/fleet.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Generic, TypeVar

from alma_schedule.dashboard.auth import Access
from alma_schedule.model import Routine, RunRecord, Scope
from alma_schedule.stores.base import Store

__all__ = ["BUDGET", "PAGE", "Listing", "RoutineFilter", "RunFilter", "fleet_routines", "fleet_runs", "scopes_of"]

PAGE = 50
#: The most rows a listing reads per table: 20 pages.
BUDGET = 20 * PAGE
_CHUNK = 4 * PAGE

T = TypeVar("T")
RKey = tuple[str, str, str]
LKey = tuple[str, str, datetime, str, str]  # org, uid, fire_at, run_id, routine_id


@dataclass
class Listing(Generic[T]):
    """A page of rows; ``after`` the key to read on from (None: nothing more); ``read`` the rows
    read; ``stopped``: the budget ended the read before the page filled ("narrow the filter")."""

    rows: list[T] = field(default_factory=list)
    after: tuple[object, ...] | None = None
    read: int = 0
    stopped: bool = False


@dataclass(frozen=True)
class RoutineFilter:
    scope: Scope | None = None
    prefix: str | None = None
    kind: str | None = None
    state: str | None = None

    def served(self) -> bool:
        """Does an index serve every filter (a scope, with or without an id prefix)?"""
        return self.kind is None and self.state is None and (self.prefix is None or self.scope is not None)


@dataclass(frozen=True)
class RunFilter:
    scope: Scope | None = None
    routine: str | None = None
    prefix: str | None = None
    state: str | None = None
    reason: str | None = None
    since: datetime | None = None
    until: datetime | None = None


def routine_state(r: Routine) -> str:
    return r.inactive_reason or ("erroring" if r.last_error is not None else "enabled")


def _ranges(access: Access, scope: Scope | None) -> list[tuple[str | None, str | None]]:
    """The key ranges a listing reads, in key order: one scope, the user's grants, or the fleet."""
    if scope is not None:
        return [(scope.org, scope.uid)] if access.allows(scope) else []
    if access.grants is None:
        return [(None, None)]
    whole = {org for org, uid in access.grants if uid is None}
    kept = {(org, uid) for org, uid in access.grants if uid is None or org not in whole}
    return sorted(kept, key=lambda g: (g[0], g[1] or ""))


def _below(prefix: str) -> str:
    """A text just below every id starting with ``prefix`` (code point order)."""
    last = ord(prefix[-1])
    return prefix[:-1] + (chr(last - 1) + "\U0010ffff" if last > 1 else "")


def fleet_routines(store: Store, access: Access, f: RoutineFilter, after: RKey | None) -> Listing[Routine]:
    """A page of routines under ``f`` the user may see, in key order after ``after``."""
    out: Listing[Routine] = Listing()

    def keep(r: Routine) -> bool:
        state = routine_state(r)
        return (
            (f.kind is None or r.kind == f.kind)
            and (state == f.state if f.state is not None else state != "deleted")
            and (f.prefix is None or r.routine_id.startswith(f.prefix))
        )

    for org, uid in _ranges(access, f.scope):
        cursor = after
        if f.prefix and uid is not None and org is not None:
            start = (org, uid, _below(f.prefix))
            cursor = start if cursor is None or cursor < start else cursor
        while out.read < BUDGET:
            want = min(PAGE + 1 if f.served() else _CHUNK, BUDGET - out.read)
            chunk = store.fleet_routines(after=cursor, limit=want, org=org, uid=uid)
            out.read += len(chunk)
            for r in chunk:
                key = (r.org, r.uid, r.routine_id)
                if f.prefix and uid is not None and r.routine_id > f.prefix and not r.routine_id.startswith(f.prefix):
                    chunk = []  # past the prefix's range: this scope is done
                    break
                if keep(r):
                    out.rows.append(r)
                    if len(out.rows) == PAGE:
                        out.after = key
                        return out
                cursor = key
            if len(chunk) < want:
                break
        if out.read >= BUDGET:
            out.after, out.stopped = cursor, True
            return out
    return out


def scopes_of(store: Store, access: Access, scope: Scope | None, after: tuple[str, str] | None) -> Iterator[Scope]:
    """The scopes a run listing visits, in key order from ``after`` on (the fleet's, one
    primary-key step each; a grant's ORG/* the same within its org)."""
    for org, uid in _ranges(access, scope):
        if org is not None and uid is not None:  # one scope
            if after is None or (org, uid) >= after:
                yield Scope(org, uid)
            continue
        cursor: tuple[str, str] | None = None
        if after is not None:
            if org is not None and after[0] > org:
                continue  # the whole org is before the cursor
            if org is None or after[0] == org:
                yield Scope(*after)  # the scope the last page stopped in
                cursor = after
        while True:
            found = store.fleet_scopes(after=cursor, limit=1, org=org)
            if not found:
                break
            cursor = found[0]
            yield Scope(*cursor)


def fleet_runs(
    store: Store, access: Access, f: RunFilter, after: LKey | None, *, page: int = PAGE
) -> Listing[RunRecord]:
    """A page of runs under ``f``: scope by scope in key order, each scope newest first (``page``
    up to :data:`BUDGET`: a count of the rows the budget reaches)."""
    out: Listing[RunRecord] = Listing()
    keep: Callable[[RunRecord], bool] = lambda r: (  # noqa: E731
        (f.state is None or r.state == f.state)
        and (f.reason is None or r.reason == f.reason)
        and (f.prefix is None or r.routine_id.startswith(f.prefix))
    )
    for sc in scopes_of(store, access, f.scope, (after[0], after[1]) if after else None):
        before: tuple[datetime, str, str] | tuple[datetime, str] | None = None
        if after is not None and (sc.org, sc.uid) == (after[0], after[1]):
            before = (after[2], after[3], after[4])
        elif f.until is not None:
            before = (f.until, "\U0010ffff")
        while out.read < BUDGET:
            want = min(_CHUNK, BUDGET - out.read)
            chunk = store.list_runs(sc, routine_id=f.routine, since=f.since, limit=want, before=before)
            out.read += len(chunk)
            for r in chunk:
                key = (r.org, r.uid, r.fire_at, r.run_id, r.routine_id)
                if keep(r):
                    out.rows.append(r)
                    if len(out.rows) == page:
                        out.after = key
                        return out
                before = (r.fire_at, r.run_id, r.routine_id)
            if len(chunk) < want:
                break
        if out.read >= BUDGET:
            if before is not None and len(before) == 3:
                out.after = (sc.org, sc.uid, before[0], before[1], before[2])
            out.stopped = True
            return out
    return out
