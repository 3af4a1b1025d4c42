"""Issue 50's audit trail of the beat sync, on the memory store, SQLite and PostgreSQL: each routine
the sync creates, updates or disables leaves ONE event naming ``beat-sync@<host>``; a second sync of
the same beat_schedule leaves none."""

from __future__ import annotations

import socket
from datetime import timedelta

from celery.schedules import crontab

from alma_schedule.model.provenance import REMOVED_FROM_BEAT
from alma_schedule.policies.audit import local_actor
from alma_schedule.stores.base import Store
from tests.beat.test_beat_sync import BASE, SCOPE, T0, store, sync  # noqa: F401 - store is the fixture

SYNCED = ("nightly", "often")  # "office" (a custom schedule class) is kept, not synced


def _actions(store: Store, name: str) -> list[tuple[str, str | None]]:  # noqa: F811
    return [(e.action, e.actor) for e in store.routine_events(SCOPE, name)]


def test_the_sync_names_itself_in_each_event_and_a_second_sync_adds_none(store: Store) -> None:  # noqa: F811
    actor = local_actor("beat-sync")
    assert actor == f"beat-sync@{socket.gethostname()}"
    sync(store, BASE)
    for name in SYNCED:
        assert _actions(store, name) == [("sync", actor)]
    sync(store, BASE, at=T0 + timedelta(minutes=1))
    for name in SYNCED:
        assert _actions(store, name) == [("sync", actor)]  # nothing changed: nothing appended
    changed = {**BASE, "nightly": {**BASE["nightly"], "schedule": crontab(minute=30, hour=3)}}
    del changed["often"]
    sync(store, changed, at=T0 + timedelta(minutes=2))
    (update, _) = store.routine_events(SCOPE, "nightly")
    assert (update.action, update.actor) == ("sync", actor)
    assert update.diff is not None and set(update.diff) == {"schedule"}
    (disable, _) = store.routine_events(SCOPE, "often")
    assert (disable.action, disable.actor, disable.reason) == ("disable", actor, REMOVED_FROM_BEAT)
    assert disable.diff == {
        "enabled": {"before": True, "after": False},
        "disabled_reason": {"before": None, "after": REMOVED_FROM_BEAT},
    }
