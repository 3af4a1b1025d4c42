"""Issue 50's audit trail through the real dashboard app (login, CSRF): a pause leaves ONE
``routine_events`` row naming the signed-in user with the diff; the routine page shows the history,
escaped, and never another org's; a resume through the Scheduler API names its ``actor=``."""

from __future__ import annotations

from dashboard_support import HOSTILE, USER, A, B, OkRunner, auth, client, csrf_of, seeded_store

from alma_schedule.engine import create_schedule
from alma_schedule.settings import Settings
from alma_schedule.testing.builders import T0

BASE = "?scope=org-a/user-1&routine=r1"


def test_a_pause_from_the_dashboard_leaves_one_event_with_the_user_and_the_diff() -> None:
    store = seeded_store()
    with client(store) as c:
        token = csrf_of(c.get("/dashboard/act/pause" + BASE, headers=auth()).text)
        done = c.post("/dashboard/act/pause" + BASE, headers=auth(), data={"csrf": token, "reason": "maintenance"})
        assert "pause done" in done.text
        (pause, registered) = store.routine_events(A, "r1")
        assert registered.action == "register" and registered.actor is None  # seeded straight into the store
        assert (pause.action, pause.actor, pause.reason, pause.at) == ("pause", USER, "maintenance", T0)
        assert pause.diff == {"paused_reason": {"before": None, "after": "maintenance"}}
        page = c.get("/dashboard/routine?scope=org-a/user-1&id=r1", headers=auth()).text
        assert "<h2>History</h2>" in page and "maintenance" in page and "paused_reason" in page
        assert f"<td>{USER}</td>" in page


def test_a_refused_or_forged_action_leaves_no_event() -> None:
    store = seeded_store()
    with client(store) as c:
        forged = c.post("/dashboard/act/pause" + BASE, headers=auth(), data={"csrf": "0" * 64, "reason": "x"})
        assert forged.status_code == 403
        assert [e.action for e in store.routine_events(A, "r1")] == ["register"]


def test_the_history_is_escaped_and_scoped() -> None:
    store = seeded_store()
    store.set_paused(A, "r1", HOSTILE, now=T0, next_due_at=None, actor=HOSTILE)
    store.set_paused(B, "secret-b", "theirs", now=T0, next_due_at=None, actor="other-org-admin")
    with client(store) as c:
        page = c.get("/dashboard/routine?scope=org-a/user-1&id=r1", headers=auth()).text
        assert HOSTILE not in page and "&lt;script&gt;" in page
        assert "other-org-admin" not in page
        outside = c.get("/dashboard/routine?scope=org-b/user-2&id=secret-b", headers=auth())
        assert "other-org-admin" not in outside.text  # org-b is outside the dashboard's scopes


def test_a_resume_through_the_api_names_its_actor() -> None:
    store = seeded_store()
    sched = create_schedule(store=store, runner=OkRunner(), settings=Settings())
    sched.pause(A, "r1", "maintenance", now=T0, actor="alice@ops")
    resumed = sched.resume(A, "r1", now=T0, actor="deploy-bot")
    assert resumed.paused_reason is None
    resume, pause, _ = sched.history(A, "r1")
    assert (resume.action, resume.actor) == ("resume", "deploy-bot")
    assert resume.diff == {"paused_reason": {"before": "maintenance", "after": None}}
    assert (pause.action, pause.actor) == ("pause", "alice@ops")


def test_a_bad_actor_through_the_api_is_refused_before_anything_is_written() -> None:
    import pytest

    from alma_schedule.errors import InvalidInput

    store = seeded_store()
    sched = create_schedule(store=store, runner=OkRunner(), settings=Settings())
    for bad in ("x" * 201, "tab\there"):
        with pytest.raises(InvalidInput, match="actor"):
            sched.pause(A, "r1", "maintenance", now=T0, actor=bad)
        with pytest.raises(InvalidInput, match="actor"):
            sched.trigger(A, "r1", now=T0, actor=bad)
    routine = store.get_routine(A, "r1")
    assert routine is not None and routine.paused_reason is None
    assert store.list_runs(A, routine_id="r1") == [] and len(sched.history(A, "r1")) == 1
