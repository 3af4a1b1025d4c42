"""Issue 50's audit trail through the real click group, on SQLite and PostgreSQL: ``routines update
--actor`` leaves ONE event naming the actor with the diff; without ``--actor`` the OS user and host;
``routines history`` shows it (``--json`` too); a bad actor is a one-line refusal writing nothing;
``runs erase`` blanks the payloads and keeps who and when."""

from __future__ import annotations

import json
import socket
from pathlib import Path

from test_cli_commands import DEFINITION, env, ok, run  # noqa: F401 - env is the shared fixture

from alma_schedule.model import Scope
from alma_schedule.policies.audit import local_actor
from alma_schedule.stores import migrate_store, open_store


def _history(env: dict[str, str]) -> list[dict[str, object]]:  # noqa: F811
    events = json.loads(ok(run(env, "routines", "history", "acme/alice", "r1", "--json")))
    assert isinstance(events, list)
    return events


def _add(env: dict[str, str]) -> None:  # noqa: F811
    migrate_store(env["ALMA_DATABASE_URL"])
    goal = json.dumps(DEFINITION)
    every = '{"every": "1h"}'
    ok(run(env, "routines", "add", "acme/alice", "r1", "--kind", "job", "--schedule", every, "--definition", goal))


def test_an_update_with_actor_leaves_one_event_with_the_diff(env: dict[str, str]) -> None:  # noqa: F811
    _add(env)
    (registered,) = _history(env)
    assert registered["action"] == "register" and registered["actor"] == local_actor()
    assert str(registered["actor"]).endswith("@" + socket.gethostname())
    ok(run(env, "routines", "update", "acme/alice", "r1", "--schedule", '{"every": "2h"}', "--actor", "alice@ops"))
    events = _history(env)
    assert len(events) == 2
    update = events[0]
    assert (update["action"], update["actor"]) == ("update", "alice@ops")
    assert update["diff"] == {"schedule": {"before": {"every": "1h"}, "after": {"every": "2h"}}}
    store = open_store(env["ALMA_DATABASE_URL"])
    try:  # the row itself, read back from the store
        rows = store.routine_events(Scope("acme", "alice"), "r1")
        assert [(e.action, e.actor) for e in rows] == [("update", "alice@ops"), ("register", local_actor())]
    finally:
        store.close()
    table = ok(run(env, "routines", "history", "acme/alice", "r1"))
    assert "alice@ops" in table and "update" in table and "2h" in table


def test_a_bad_actor_is_a_one_line_refusal_and_writes_nothing(env: dict[str, str]) -> None:  # noqa: F811
    _add(env)
    for bad in ("x" * 201, "alice\x1b[2J"):
        out = run(env, "routines", "pause", "acme/alice", "r1", "--actor", bad)
        assert out.exit_code != 0 and "actor" in out.output and len(out.output.strip().splitlines()) == 1
    shown = json.loads(ok(run(env, "routines", "show", "acme/alice", "r1", "--json")))
    assert shown["paused_reason"] is None
    assert [e["action"] for e in _history(env)] == ["register"]


def test_levers_record_their_actor_and_erase_blanks_the_payloads(env: dict[str, str]) -> None:  # noqa: F811
    _add(env)
    ok(run(env, "routines", "pause", "acme/alice", "r1", "--reason", "maintenance", "--actor", "bob@ops"))
    ok(run(env, "routines", "resume", "acme/alice", "r1", "--actor", "bob@ops"))
    ok(run(env, "routines", "disable", "acme/alice", "r1"))
    events = _history(env)
    assert [(e["action"], e["actor"]) for e in events] == [
        ("disable", local_actor()),
        ("resume", "bob@ops"),
        ("pause", "bob@ops"),
        ("register", local_actor()),
    ]
    assert events[2]["reason"] == "maintenance"
    ok(run(env, "runs", "erase", "acme/alice", "--yes"))
    erased = _history(env)
    assert [(e["action"], e["actor"], e["at"]) for e in erased] == [(e["action"], e["actor"], e["at"]) for e in events]
    assert all(e["reason"] is None and e["diff"] is None for e in erased)
    assert "(erased)" in ok(run(env, "routines", "history", "acme/alice", "r1"))


def test_history_of_an_unknown_routine_is_empty(env: dict[str, str], tmp_path: Path) -> None:  # noqa: F811
    migrate_store(env["ALMA_DATABASE_URL"])
    assert "no events" in ok(run(env, "routines", "history", "acme/alice", "nobody"))
