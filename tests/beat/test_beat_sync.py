"""The beat sync (``beat/sync.py``) on the memory store, SQLite and PostgreSQL: declarative,
idempotent, keeps what operators did, adopts import-beat's routines, converges under concurrency."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from celery import Celery
from celery.schedules import crontab

from alma_schedule.beat.importer import apply_import, plan_import
from alma_schedule.beat.sync import SyncPlan, apply_sync, plan_changes, plan_sync, sync_scope
from alma_schedule.engine import Scheduler, create_scheduler
from alma_schedule.errors import ConfigurationError
from alma_schedule.model import Scope
from alma_schedule.model.provenance import REMOVED_FROM_BEAT
from alma_schedule.runners.task import TaskRunner
from alma_schedule.settings import Settings
from alma_schedule.stores import open_store
from alma_schedule.stores.base import Store
from alma_schedule.stores.memory import MemoryStore
from alma_schedule.stores.sql import migrate_store
from tests.beat.fleet_app import BusinessHours, define_tasks
from tests.stores.sql_support import fast_dir, pg_database

T0 = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(hours=1)  # in the past: never clamped
SCOPE = Scope("beat", "fleet")
SETTINGS = Settings(database_url="memory://")


def fleet(entries: dict[str, dict[str, Any]]) -> Celery:
    app = Celery("fleet", broker="memory://", set_as_current=False)
    app.conf.update(task_serializer="json", accept_content=["json"], timezone="UTC", beat_schedule=entries)
    define_tasks(app)
    return app


BASE: dict[str, dict[str, Any]] = {
    "nightly": {"task": "fleet.add", "schedule": crontab(minute=0, hour=2), "args": (1, 2)},
    "often": {"task": "fleet.ping", "schedule": timedelta(seconds=30)},
    "office": {"task": "fleet.ping", "schedule": BusinessHours()},
    "celery.backend_cleanup": {"task": "celery.backend_cleanup", "schedule": crontab(minute=0, hour=4)},
}


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def store(request: pytest.FixtureRequest) -> Iterator[Store]:
    if request.param == "memory":
        yield MemoryStore()
        return
    if request.param == "sqlite":
        with fast_dir() as path:
            url = f"sqlite:///{Path(path)}/s.sqlite3"
            migrate_store(url)
            s = open_store(url)
            yield s
            s.close()
        return
    with pg_database() as url:
        s = open_store(url)
        yield s
        s.close()


def engine(store: Store, app: Celery) -> Scheduler:
    return create_scheduler(store=store, runner=TaskRunner(app), settings=SETTINGS)


def sync(store: Store, entries: dict[str, dict[str, Any]], at: datetime = T0, prune: str = "disable") -> dict[str, str]:
    app = fleet(entries)
    changes = apply_sync(engine(store, app), plan_sync(app, SCOPE, prune=prune), at)
    return {c.name: c.action for c in changes}


def test_entries_become_routines_and_a_second_sync_writes_nothing(store: Store) -> None:
    plan = plan_sync(fleet(BASE), SCOPE)
    assert plan.names == ("nightly", "often") and [n for n, _ in plan.kept] == ["office"]
    assert sync(store, BASE) == {"nightly": "create", "often": "create"}
    nightly = store.get_routine(SCOPE, "nightly")
    assert nightly is not None and nightly.kind == "task"
    assert (nightly.source, nightly.source_entry) == ("beat-sync:fleet", "nightly")
    assert dict(nightly.schedule)["cron"] == "0 2 * * *"
    assert sync(store, BASE, T0 + timedelta(minutes=1)) == {"nightly": "unchanged", "often": "unchanged"}
    assert len(store.routine_versions(SCOPE, "nightly")) == 1


def test_a_changed_entry_is_updated_and_the_anchor_moves_only_with_the_interval(store: Store) -> None:
    sync(store, BASE)
    before = store.get_routine(SCOPE, "often")
    assert before is not None
    args_only = {**BASE, "often": {**BASE["often"], "kwargs": {"label": "x"}}}
    assert sync(store, args_only, T0 + timedelta(minutes=3))["often"] == "update"
    kept = store.get_routine(SCOPE, "often")
    assert kept is not None and kept.registered_at == before.registered_at and dict(kept.definition)["kwargs"]
    faster = {**args_only, "often": {**args_only["often"], "schedule": timedelta(seconds=20)}}
    assert sync(store, faster, T0 + timedelta(minutes=5))["often"] == "update"
    moved = store.get_routine(SCOPE, "often")
    assert moved is not None and moved.registered_at == T0 + timedelta(minutes=5)


def test_a_removed_entry_is_disabled_then_enabled_when_it_comes_back(store: Store) -> None:
    sync(store, BASE)
    without = {k: v for k, v in BASE.items() if k != "often"}
    assert sync(store, without, T0 + timedelta(minutes=1)) == {"nightly": "unchanged", "often": "disable"}
    gone = store.get_routine(SCOPE, "often")
    assert gone is not None and not gone.enabled and gone.disabled_reason == REMOVED_FROM_BEAT
    assert gone.next_due_at is None
    assert sync(store, without, T0 + timedelta(minutes=2)) == {"nightly": "unchanged"}  # stays disabled
    assert sync(store, BASE, T0 + timedelta(minutes=3))["often"] == "enable"
    back = store.get_routine(SCOPE, "often")
    assert back is not None and back.enabled and back.disabled_reason is None and back.next_due_at is not None


def test_prune_delete_deletes_the_removed_entry(store: Store) -> None:
    sync(store, BASE)
    without = {k: v for k, v in BASE.items() if k != "often"}
    assert sync(store, without, T0 + timedelta(minutes=1), prune="delete")["often"] == "delete"
    assert store.get_routine(SCOPE, "often") is None
    assert store.get_routine(SCOPE, "often", include_deleted=True) is not None  # tombstone: its ledger stays


def test_an_operators_pause_and_disable_survive_a_sync(store: Store) -> None:
    sync(store, BASE)
    store.set_paused(SCOPE, "nightly", "maintenance", now=T0, next_due_at=None)
    store.set_enabled(SCOPE, "often", False, now=T0, next_due_at=None)
    changed = {**BASE, "nightly": {**BASE["nightly"], "schedule": crontab(minute=0, hour=3)}}
    assert sync(store, changed, T0 + timedelta(minutes=1)) == {"nightly": "update", "often": "unchanged"}
    nightly, often = store.get_routine(SCOPE, "nightly"), store.get_routine(SCOPE, "often")
    assert (
        nightly is not None and nightly.paused_reason == "maintenance" and dict(nightly.schedule)["cron"] == "0 3 * * *"
    )
    assert often is not None and not often.enabled  # the operator's disable is not the sync's to lift
    without = {k: v for k, v in BASE.items() if k != "often"}
    sync(store, without, T0 + timedelta(minutes=2))
    sync(store, BASE, T0 + timedelta(minutes=3))
    often = store.get_routine(SCOPE, "often")
    assert often is not None and not often.enabled and often.disabled_reason is None


def test_the_dry_run_writes_nothing(store: Store) -> None:
    app = fleet(BASE)
    changes = plan_changes(store, plan_sync(app, SCOPE), T0)
    assert {c.name: c.action for c in changes} == {"nightly": "create", "often": "create"}
    assert store.list_routines(SCOPE) == []


def test_the_sync_adopts_the_one_routine_import_beat_made_of_the_entry(store: Store) -> None:
    app = fleet(BASE)
    ops = Scope("acme", "ops")
    apply_import(engine(store, app), plan_import(app, ops), now=T0)
    imported = store.get_routine(ops, "nightly")
    assert imported is not None and (imported.source, imported.source_entry) == ("import-beat:fleet", "nightly")
    store.set_paused(ops, "nightly", "on hold", now=T0, next_due_at=None)
    assert sync(store, BASE, T0 + timedelta(minutes=1)) == {"nightly": "adopt", "often": "adopt"}
    assert store.get_routine(ops, "nightly") is None and store.get_routine(ops, "often") is None  # moved
    adopted = store.get_routine(SCOPE, "nightly")
    assert adopted is not None and adopted.source == "beat-sync:fleet" and adopted.paused_reason == "on hold"
    assert sync(store, BASE, T0 + timedelta(minutes=2)) == {"nightly": "unchanged", "often": "unchanged"}


def test_an_ambiguous_adoption_is_refused_naming_both(store: Store) -> None:
    app = fleet(BASE)
    for scope in (Scope("acme", "ops"), Scope("acme", "dev")):
        apply_import(engine(store, app), plan_import(app, scope), now=T0)
    changes = apply_sync(engine(store, app), plan_sync(app, SCOPE), T0 + timedelta(minutes=1))
    nightly = next(c for c in changes if c.name == "nightly")
    assert nightly.action == "ambiguous" and nightly.detail is not None
    assert "acme/dev/nightly" in nightly.detail and "acme/ops/nightly" in nightly.detail
    assert store.list_routines(SCOPE) == [] and store.get_routine(Scope("acme", "ops"), "nightly") is not None


def test_concurrent_syncs_converge_without_an_error(store: Store) -> None:
    app = fleet(BASE)
    plan: SyncPlan = plan_sync(app, SCOPE)
    errors: list[BaseException] = []

    def one() -> None:
        try:
            apply_sync(engine(store, app), plan, T0)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=one) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    assert [r.routine_id for r in store.list_routines(SCOPE)] == ["nightly", "often"]
    assert len(store.routine_versions(SCOPE, "nightly")) == 1


@pytest.mark.parametrize(
    ("changes", "named"),
    [({"beat_sync_scope": "no-slash"}, "alma_beat_sync_scope"), ({"beat_sync_prune": "drop"}, "alma_beat_sync_prune")],
)
def test_a_bad_sync_setting_is_one_line_naming_it(changes: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigurationError) as err:
        sync_scope(fleet(BASE), SETTINGS.replace(**changes))
    assert named in str(err.value) and "\n" not in str(err.value)
    assert sync_scope(fleet(BASE), SETTINGS) == SCOPE


def test_two_releases_in_a_rolling_deploy_never_delete_what_the_other_names(store: Store) -> None:
    old = dict(BASE)
    new = {k: v for k, v in BASE.items() if k != "often"}
    new["nightly"] = {**BASE["nightly"], "schedule": crontab(minute=30, hour=2)}
    new["fresh"] = {"task": "fleet.ping", "schedule": timedelta(minutes=5)}
    for i, entries in enumerate([old, new, old, new]):  # old and new beats restarting in turn
        sync(store, entries, T0 + timedelta(minutes=i))
    rows = {r.routine_id: r for r in store.list_routines(SCOPE)}
    assert set(rows) == {"nightly", "often", "fresh"}  # nothing deleted on the way
    assert dict(rows["nightly"].schedule)["cron"] == "30 2 * * *"  # the last release to start wins
    assert not rows["often"].enabled and rows["often"].disabled_reason == REMOVED_FROM_BEAT
    sync(store, old, T0 + timedelta(minutes=9))  # a rollback enables it again
    often = store.get_routine(SCOPE, "often")
    assert often is not None and often.enabled
