"""The beat sync: a Celery app's ``beat_schedule``, kept in code, made the routines of one scope.

Declarative and idempotent; every write is one of the store's atomic operations, so concurrent
syncs (several beats, two releases) converge. docs/architecture.md, "The schedule stays in code".
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from alma_schedule.beat.importer import ImportPlan, plan_import
from alma_schedule.core import parse_policy, validate_schedule
from alma_schedule.engine.register import restart_due
from alma_schedule.engine.revision import canonical_json
from alma_schedule.errors import ConfigurationError, InvalidInput, InvalidSchedule, NotFound, RegistrationRefused
from alma_schedule.model import TICK_TASK, Routine, RoutineSpec, Scope
from alma_schedule.model.provenance import REMOVED_FROM_BEAT, beat_sync_source, import_beat_source
from alma_schedule.policies.audit import local_actor

if TYPE_CHECKING:
    from celery import Celery

    from alma_schedule.engine import Scheduler
    from alma_schedule.policies.allow import TaskAllow
    from alma_schedule.settings import Settings
    from alma_schedule.stores.base import Store

PRUNES = ("disable", "delete")
#: ``disabled_reason`` of an ``import-beat`` routine while the sync moves it into its scope.
ADOPTING = "adopted by the beat sync"
PAGE = 1000


def sync_scope(app: Celery, settings: Settings) -> Scope:
    """``alma_beat_sync_scope``, default ``beat/<app main name>``; a value that is not a valid
    ``ORG/UID`` (or a prune that is not ``disable``/``delete``) is one :class:`ConfigurationError` line."""
    if settings.beat_sync_prune not in PRUNES:
        raise ConfigurationError(
            f"alma_beat_sync_prune (ALMA_BEAT_SYNC_PRUNE) is {settings.beat_sync_prune!r}: use disable or delete"
        )
    text = settings.beat_sync_scope or f"beat/{app.main}"
    try:
        return Scope.parse(text)
    except InvalidInput as exc:
        raise ConfigurationError(
            f"alma_beat_sync_scope (ALMA_BEAT_SYNC_SCOPE) {text!r} is not a valid ORG/UID scope: {exc}"
        ) from None


@dataclass(frozen=True, slots=True)
class Change:
    """One line of a sync: ``name`` (entry / routine id), ``action`` and a detail.

    Actions: create, update, unchanged, enable, disable, delete, adopt, ambiguous, refused."""

    name: str
    action: str
    detail: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "action": self.action, "detail": self.detail}


@dataclass(frozen=True, slots=True)
class SyncPlan:
    """What a sync manages: the entries that leave beat (``specs``) and those beat keeps (``kept``)."""

    app: str
    scope: Scope
    prune: str
    specs: tuple[RoutineSpec, ...]
    kept: tuple[tuple[str, str], ...]

    @property
    def names(self) -> tuple[str, ...]:
        """The entries beat must not run itself (each is a routine of the scope, or refused)."""
        return tuple(s.routine_id for s in self.specs)


def plan_sync(app: Celery, scope: Scope, *, prune: str = "disable", allow: TaskAllow | None = None) -> SyncPlan:
    """Convert ``app``'s ``beat_schedule`` for the sync (imports its task modules; writes nothing).
    ``celery.*`` entries and entries sending our tick are neither synced nor listed."""
    plan: ImportPlan = plan_import(app, scope, allow=allow, source=beat_sync_source(app.main or "?"))
    specs: list[RoutineSpec] = []
    kept: list[tuple[str, str]] = []
    for conv in plan.conversions:
        if conv.name.startswith("celery.") or (conv.task or "").startswith("celery.") or conv.task == TICK_TASK:
            continue
        if conv.spec is not None:
            specs.append(conv.spec)
        else:
            kept.append((conv.name, conv.refused or "cannot be converted"))
    return SyncPlan(plan.app, scope, prune, tuple(specs), tuple(kept))


def _scope_routines(store: Store, scope: Scope) -> Iterator[Routine]:
    after: str | None = None
    while True:
        page = store.list_routines(scope, limit=PAGE, after=after)
        yield from page
        if len(page) < PAGE:
            return
        after = page[-1].routine_id


def _imported(store: Store, app: str, names: set[str]) -> dict[str, list[Routine]]:
    """The live ``import-beat:<app>`` routines of every scope, by entry name (one paged system read)."""
    source = import_beat_source(app)
    found: dict[str, list[Routine]] = {}
    after: tuple[str, str, str] | None = None
    while names:
        page = store.system_routines(kind="task", limit=PAGE, after=after)
        for r in page:
            if r.source == source and r.source_entry in names:
                found.setdefault(r.source_entry, []).append(r)
        if len(page) < PAGE:
            break
        after = (page[-1].org, page[-1].uid, page[-1].routine_id)
    return found


def _differs(routine: Routine, spec: RoutineSpec, now: datetime) -> bool:
    """Whether registering ``spec`` would change ``routine``'s kind, schedule or definition."""
    try:
        sched = validate_schedule(spec.schedule, now=now)
        stored = {**sched.to_json(), **parse_policy(spec.schedule).to_json()}
    except (InvalidSchedule, InvalidInput):
        return True
    return (routine.kind, canonical_json(routine.schedule), canonical_json(routine.definition)) != (
        spec.kind,
        canonical_json(stored),
        canonical_json(dict(spec.definition)),
    )


def plan_changes(store: Store, plan: SyncPlan, now: datetime) -> list[Change]:
    """What a sync of ``plan`` would change (reads only): ``beat sync --dry-run``, and the sync itself."""
    current = {r.routine_id: r for r in _scope_routines(store, plan.scope)}
    source = beat_sync_source(plan.app)
    missing = {s.routine_id for s in plan.specs if s.routine_id not in current}
    imported = _imported(store, plan.app, missing)
    out: list[Change] = []
    for spec in plan.specs:
        name, live = spec.routine_id, current.get(spec.routine_id)
        if live is None:
            olds = [r for r in imported.get(name, []) if r.scope != plan.scope]
            if len(olds) > 1:
                keys = " and ".join(str(r.key) for r in olds[:2])
                out.append(Change(name, "ambiguous", f"import-beat registered it twice: {keys}; delete one"))
            elif olds:
                out.append(Change(name, "adopt", f"from {olds[0].key}"))
            else:
                out.append(Change(name, "create"))
            continue
        if not live.enabled and live.disabled_reason == REMOVED_FROM_BEAT:
            out.append(Change(name, "enable", "back in beat_schedule"))
        if _differs(live, spec, now):
            out.append(Change(name, "update", "schedule or definition changed"))
        elif live.enabled or live.disabled_reason != REMOVED_FROM_BEAT:
            out.append(Change(name, "unchanged", live.inactive_reason))
    names, ours = set(plan.names), (source, import_beat_source(plan.app))
    for routine in current.values():
        if routine.source not in ours or routine.routine_id in names:
            continue
        if plan.prune == "delete":
            out.append(Change(routine.routine_id, "delete", REMOVED_FROM_BEAT))
        elif routine.enabled:
            out.append(Change(routine.routine_id, "disable", REMOVED_FROM_BEAT))
    return out


def apply_sync(schedule: Scheduler, plan: SyncPlan, now: datetime) -> list[Change]:
    """Sync ``plan`` into its scope: :func:`plan_changes`, each change then made with one atomic
    store operation (a concurrent sync's same change is a no-op), each naming ``beat-sync@<host>`` in
    the audit trail. Raises the store's errors."""
    store = schedule.store
    specs = {s.routine_id: s for s in plan.specs}
    out: list[Change] = []
    actor = local_actor("beat-sync")
    for change in plan_changes(store, plan, now):
        spec = specs.get(change.name)
        try:
            out.append(_apply(schedule, plan, change, spec, now, actor))
        except RegistrationRefused as exc:
            out.append(Change(change.name, "refused", exc.reason))
        except NotFound:  # deleted by someone else meanwhile: nothing left to do
            out.append(dataclasses.replace(change, action="unchanged", detail="gone"))
    return out


def _apply(
    schedule: Scheduler, plan: SyncPlan, change: Change, spec: RoutineSpec | None, now: datetime, actor: str
) -> Change:
    store, scope, name = schedule.store, plan.scope, change.name
    if change.action == "disable":
        store.set_enabled(scope, name, False, now=now, next_due_at=None, reason=REMOVED_FROM_BEAT, actor=actor)
    elif change.action == "delete":
        store.delete_routine(scope, name, now=now, actor=actor)
    elif change.action == "enable":
        live = store.get_routine(scope, name)
        if live is not None and not live.enabled and live.disabled_reason == REMOVED_FROM_BEAT:
            store.set_enabled(scope, name, True, now=now, next_due_at=restart_due(live, now), actor=actor)
    elif change.action in ("create", "update") and spec is not None:
        receipt = schedule.register(spec, now=now, actor=actor)
        return change if receipt.changed else dataclasses.replace(change, action="unchanged", detail=None)
    elif change.action == "adopt" and spec is not None:
        _adopt(schedule, plan, spec, now, actor)
    return change


def _adopt(schedule: Scheduler, plan: SyncPlan, spec: RoutineSpec, now: datetime, actor: str) -> None:
    """Move the one ``import-beat`` routine of this entry into the sync's scope: disable it (no
    fire from both), register the entry, carry an operator's pause or disable, tombstone the old
    one (its ledger stays)."""
    store = schedule.store
    olds = _imported(store, plan.app, {spec.routine_id}).get(spec.routine_id, [])
    olds = [r for r in olds if r.scope != plan.scope]
    if len(olds) != 1:  # gone or doubled meanwhile: the next sync sees it
        return
    old = olds[0]
    operator_disabled = not old.enabled and old.disabled_reason != ADOPTING
    if old.enabled:
        store.set_enabled(old.scope, old.routine_id, False, now=now, next_due_at=None, reason=ADOPTING, actor=actor)
    schedule.register(spec, now=now, actor=actor)
    if old.paused_reason is not None:
        store.set_paused(plan.scope, spec.routine_id, old.paused_reason, now=now, next_due_at=None, actor=actor)
    if operator_disabled:
        store.set_enabled(plan.scope, spec.routine_id, False, now=now, next_due_at=None, actor=actor)
    store.delete_routine(old.scope, old.routine_id, now=now, actor=actor)


def summary(changes: list[Change]) -> str:
    """``2 create, 1 disable, 3 unchanged`` (in the order actions first appear)."""
    counts: dict[str, int] = {}
    for c in changes:
        counts[c.action] = counts.get(c.action, 0) + 1
    return ", ".join(f"{n} {a}" for a, n in counts.items()) or "nothing to sync"
