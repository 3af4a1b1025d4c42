"""Who opens the dashboard, through the real ASGI app: credentials, the tick secret, read-only,
CSRF, scopes, and the settings that turn it on."""

from __future__ import annotations

import pytest
from dashboard_support import (
    PAGES,
    PASSWORD,
    PASSWORD_HASH,
    USER,
    A,
    B,
    auth,
    client,
    csrf_of,
    dashboard_settings,
    seeded_store,
)

from alma_schedule.dashboard.auth import Credentials, hash_password, verify_password
from alma_schedule.errors import ConfigurationError
from alma_schedule.http import create_http_app
from alma_schedule.settings import Secret, load_settings


@pytest.mark.parametrize("path", PAGES)
def test_every_page_needs_the_dashboard_credentials(path: str) -> None:
    with client(seeded_store()) as c:
        none = c.get(path)
        assert none.status_code == 401 and none.headers["www-authenticate"].startswith("Basic realm=")
        assert c.get(path, headers=auth(password="wrong")).status_code == 401
        assert c.get(path, headers=auth(user="root")).status_code == 401
        tick_secret = {"X-Alma-Secret": "tick-secret-of-the-clock"}
        assert c.get(path, headers=tick_secret).status_code == 401  # never the tick's secret
        assert c.get(path, headers={"Authorization": "Bearer tick-secret"}).status_code == 401
        assert c.get(path, headers=auth()).status_code == 200


def test_healthz_stays_open_and_shows_only_ok_and_the_age() -> None:
    with client(seeded_store()) as c:
        got = c.get("/healthz")
        assert got.status_code == 200
        assert got.json() == {"ok": True, "status": "ok", "age_seconds": 30.0}


def test_a_write_without_the_csrf_token_is_refused_and_changes_nothing() -> None:
    store = seeded_store()
    with client(store) as c:
        path = "/dashboard/act/pause?scope=org-a/user-1&routine=r1"
        assert c.post(path, headers=auth(), data={"reason": "x"}).status_code == 403
        assert c.post(path, headers=auth(), data={"reason": "x", "csrf": "0" * 64}).status_code == 403
        assert c.post(path, data={"csrf": csrf_of(c.get(path, headers=auth()).text)}).status_code == 401
        routine = store.get_routine(A, "r1")
        assert routine is not None and routine.paused_reason is None


def test_read_only_mode_refuses_every_action_even_with_a_token() -> None:
    store = seeded_store()
    with client(store) as c_write:
        token = csrf_of(c_write.get("/dashboard/act/pause?scope=org-a/user-1&routine=r1", headers=auth()).text)
    with client(store, dashboard_read_only=True) as c:
        page = c.get("/dashboard/routine?scope=org-a/user-1&id=r1", headers=auth()).text
        assert "/dashboard/act/" not in page and "read-only" in page
        confirm = c.get("/dashboard/act/pause?scope=org-a/user-1&routine=r1", headers=auth())
        assert "read-only" in confirm.text and 'name="csrf"' not in confirm.text
        refused = c.post("/dashboard/act/pause?scope=org-a/user-1&routine=r1", headers=auth(), data={"csrf": token})
        assert refused.status_code == 403
    routine = store.get_routine(A, "r1")
    assert routine is not None and routine.paused_reason is None


def test_scopes_limit_what_is_shown_and_what_is_acted_on() -> None:
    store = seeded_store()
    with client(store) as c:  # org-a/* only
        for path in [
            "/dashboard/routines?scope=org-b/user-2",
            "/dashboard/routine?scope=org-b/user-2&id=secret-b",
            "/dashboard/ledger?scope=org-b/user-2",
            "/dashboard/act/pause?scope=org-b/user-2&routine=secret-b",
        ]:
            got = c.get(path, headers=auth())
            assert got.status_code == 404 and "secret-b" not in got.text
        token = csrf_of(c.get("/dashboard/act/pause?scope=org-a/user-1&routine=r1", headers=auth()).text)
        post = c.post("/dashboard/act/pause?scope=org-b/user-2&routine=secret-b", headers=auth(), data={"csrf": token})
        assert post.status_code == 404
        overview = c.get("/dashboard/", headers=auth()).text
        assert "ALMA_DASHBOARD_SCOPES=* only" in overview  # no fleet-wide counts for a scoped user
    routine = store.get_routine(B, "secret-b")
    assert routine is not None and routine.paused_reason is None
    with client(store, dashboard_scopes="*") as fleet:
        assert "secret-b" in fleet.get("/dashboard/routines?scope=org-b/user-2", headers=auth()).text
        assert "Routines by state (the whole fleet)" in fleet.get("/dashboard/", headers=auth()).text


def test_the_password_hash_is_scrypt_and_checked_in_constant_time() -> None:
    stored = PASSWORD_HASH
    assert stored.startswith("scrypt$16384$8$1$")
    assert verify_password(PASSWORD, stored) and not verify_password(PASSWORD + "x", stored)
    assert hash_password(PASSWORD) != stored  # a fresh salt each time
    creds = Credentials(USER, stored)
    assert creds.check(auth()["Authorization"]) == USER
    assert creds.check(auth(password="nope")["Authorization"]) is None
    assert creds.check("Basic !!!") is None and creds.check(None) is None
    assert creds.csrf_ok(USER, creds.csrf_token(USER)) and not creds.csrf_ok(USER, None)


def test_the_dashboard_is_off_until_its_scopes_are_set_and_its_settings_are_checked() -> None:
    off = create_http_app(dashboard_settings(dashboard_scopes=None), store=seeded_store(), send=lambda s, n: "t")
    from starlette.testclient import TestClient

    with TestClient(off) as c:
        assert c.get("/dashboard/", headers=auth()).status_code == 404
    with pytest.raises(ConfigurationError, match="ALMA_DASHBOARD_PASSWORD_HASH must be scrypt"):
        create_http_app(dashboard_settings(dashboard_password_hash=Secret("plain")), store=seeded_store())
    env = {"ALMA_DASHBOARD_SCOPES": "org-a"}
    with pytest.raises(ConfigurationError, match="ALMA_DASHBOARD_SCOPES: 'org-a' must be"):
        load_settings(environ=env)
    with pytest.raises(ConfigurationError, match="ALMA_DASHBOARD_USER and ALMA_DASHBOARD_PASSWORD_HASH"):
        load_settings(environ={"ALMA_DASHBOARD_SCOPES": "*"})
    s = load_settings(
        environ={
            "ALMA_DASHBOARD_SCOPES": "org-a/*,org-b/u",
            "ALMA_DASHBOARD_USER": "ops",
            "ALMA_DASHBOARD_PASSWORD_HASH": "scrypt$x",
        }
    )
    assert s.dashboard_read_only is True and s.metrics_token is None


def test_hash_password_prints_a_hash_the_dashboard_accepts() -> None:
    from click.testing import CliRunner

    from alma_schedule.cli import cli

    result = CliRunner().invoke(cli, ["hash-password", "--password", PASSWORD])
    assert result.exit_code == 0, result.output
    stored = result.output.strip()
    assert stored.startswith("scrypt$16384$8$1$") and verify_password(PASSWORD, stored)
    assert Credentials(USER, stored).check(auth()["Authorization"]) == USER


@pytest.mark.parametrize("action", ["pause", "resume", "enable", "disable", "trigger", "record"])
def test_read_only_refuses_each_action(action: str) -> None:
    store = seeded_store()
    query = "?scope=org-a/user-1&routine=r1" + ("&run=2026-03-01T12:00:00Z" if action == "record" else "")
    with client(store) as c_write:
        token = csrf_of(c_write.get("/dashboard/act/pause?scope=org-a/user-1&routine=r1", headers=auth()).text)
    with client(store, dashboard_read_only=True) as c:
        got = c.post(f"/dashboard/act/{action}{query}", headers=auth(), data={"csrf": token, "outcome": "failed"})
        assert got.status_code == 403 and "read-only" in got.text
    routine = store.get_routine(A, "r1")
    assert routine is not None and routine.enabled and routine.paused_reason is None
    assert store.list_runs(A, routine_id="r1") == []


def test_the_stuck_page_of_a_scoped_user_shows_nothing_of_another_org() -> None:
    from datetime import timedelta

    from alma_schedule.testing.builders import T0, make_routine, run_in, running

    store = seeded_store()
    mine = run_in(store, "running", "stuck-a", now=T0 - timedelta(days=1))
    store.put_routine(make_routine("stuck-b", scope=B, next_due_at=T0 - timedelta(days=2)), now=T0 - timedelta(days=3))
    theirs = running(store, "stuck-b", now=T0 - timedelta(days=2))
    with client(store) as c:
        page = c.get("/dashboard/stuck", headers=auth()).text
        assert mine.run_id in page and "stuck-a" in page
        assert "stuck-b" not in page and "org-b" not in page
    with client(store, dashboard_scopes="*") as fleet:
        assert theirs.run_id in fleet.get("/dashboard/stuck", headers=auth()).text
