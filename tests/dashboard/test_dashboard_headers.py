"""Issue 45, item 4: every answer of serve-http carries the security headers, the dashboard's CSS is
its own file (no inline style), and a write naming another site in its Origin or Referer is
refused, through the real ASGI app over a memory store."""

from __future__ import annotations

import re

import pytest
from dashboard_support import PAGES, PAUSE, A, auth, client, csrf_of, seeded_store

from alma_schedule.errors import ConfigurationError
from alma_schedule.settings import Secret, load_settings

EXPECTED = {
    "content-security-policy": "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; "
    "base-uri 'none'; frame-ancestors 'none'",
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
}


def _has_security_headers(headers: object) -> None:
    for name, value in EXPECTED.items():
        assert headers[name] == value, name  # type: ignore[index]


def test_every_response_carries_the_security_headers() -> None:
    with client(seeded_store(), metrics_token=Secret("scrape-me")) as c:
        answers = [c.get(path, headers=auth()) for path in PAGES]
        answers += [
            c.get("/dashboard/"),  # 401
            c.get("/dashboard/routine?scope=org-b/user-2&id=secret-b", headers=auth()),  # 404
            c.get("/dashboard", headers=auth(), follow_redirects=False),  # 307
            c.get("/dashboard/static/dashboard.css"),
            c.post(PAUSE, headers=auth(), data={"csrf": "0" * 64}),  # 403
            c.get("/metrics", headers={"Authorization": "Bearer scrape-me"}),
            c.get("/metrics"),
            c.get("/healthz"),
            c.post("/tick"),  # 401
        ]
        assert {a.status_code for a in answers} == {200, 401, 404, 307, 403}
        for answer in answers:
            _has_security_headers(answer.headers)


def test_the_css_is_served_from_static_and_no_page_has_inline_style() -> None:
    with client(seeded_store()) as c:
        css = c.get("/dashboard/static/dashboard.css")
        assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")
        assert "nav{" in css.text and "nav .who{" in css.text
        for path in PAGES:
            page = c.get(path, headers=auth()).text
            assert '<link rel="stylesheet" href="/dashboard/static/dashboard.css">' in page
            assert "<style" not in page.lower()
            assert not re.search(r"<[^>]*\sstyle\s*=", page, re.IGNORECASE), path


@pytest.mark.parametrize(
    "headers",
    [
        {"Origin": "https://evil.example"},
        {"Origin": "http://testserver:8080"},  # another port is another origin
        {"Origin": "https://testserver"},  # another scheme too
        {"Referer": "https://evil.example/page"},  # no Origin: the Referer decides
        {"Origin": "https://evil.example", "Referer": "http://testserver/dashboard/"},  # the Origin wins
    ],
)
def test_a_write_from_another_site_is_refused_even_with_the_token(headers: dict[str, str]) -> None:
    store = seeded_store()
    with client(store) as c:
        token = csrf_of(c.get(PAUSE, headers=auth()).text)
        refused = c.post(PAUSE, headers={**auth(), **headers}, data={"csrf": token, "reason": "x"})
        assert refused.status_code == 403 and "origin" in refused.text.lower()
    routine = store.get_routine(A, "r1")
    assert routine is not None and routine.paused_reason is None


@pytest.mark.parametrize(
    "headers",
    [
        {"Origin": "http://testserver"},
        {"Origin": "HTTP://TestServer:80"},
        {"Referer": "http://testserver/dashboard/act/pause"},
        {"Origin": "null"},  # what a browser sends under Referrer-Policy: no-referrer: the token decides
        {},  # neither: the token decides, as before
    ],
)
def test_a_write_from_the_dashboard_itself_is_done(headers: dict[str, str]) -> None:
    store = seeded_store()
    with client(store) as c:
        token = csrf_of(c.get(PAUSE, headers=auth()).text)
        done = c.post(PAUSE, headers={**auth(), **headers}, data={"csrf": token, "reason": "planned"})
        assert done.status_code == 200 and "pause done" in done.text
        no_token = c.post(PAUSE, headers={**auth(), **headers}, data={"reason": "x"})
        assert no_token.status_code == 403
    routine = store.get_routine(A, "r1")
    assert routine is not None and routine.paused_reason == "planned"


def test_behind_a_proxy_the_configured_origin_is_the_dashboards_own() -> None:
    store = seeded_store()
    with client(store, dashboard_origin="https://ops.example.com") as c:
        token = csrf_of(c.get(PAUSE, headers=auth()).text)
        own_host = c.post(PAUSE, headers={**auth(), "Origin": "http://testserver"}, data={"csrf": token})
        assert own_host.status_code == 403  # the Host is the proxy's upstream, not the dashboard's origin
        done = c.post(PAUSE, headers={**auth(), "Origin": "https://ops.example.com"}, data={"csrf": token})
        assert done.status_code == 200 and "pause done" in done.text


@pytest.mark.parametrize(
    "value", ["ops.example.com", "ftp://ops.example.com", "https://ops.example.com/dashboard", "https://"]
)
def test_a_dashboard_origin_that_is_no_origin_is_refused_naming_the_setting(value: str) -> None:
    with pytest.raises(ConfigurationError, match=r"ALMA_DASHBOARD_ORIGIN: .* is not an origin"):
        load_settings(environ={"ALMA_DASHBOARD_ORIGIN": value})
    assert load_settings(environ={"ALMA_DASHBOARD_ORIGIN": "https://ops.example.com:8443"}).dashboard_origin
