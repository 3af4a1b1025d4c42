"""Issue 45, item 9: with the store down (nothing listens) or not migrated, every dashboard page (the
confirmations of writes too) and ``/metrics`` answer 503 with one line, and the log holds one line per request, no
traceback; ``/healthz`` stays 503 as before. The real ASGI app opens the store itself, as serve-http
does."""

from __future__ import annotations

import logging

import pytest
from dashboard_support import PAGES, auth, dashboard_settings
from starlette.testclient import TestClient

from alma_schedule.http import create_http_app
from alma_schedule.settings import Secret

DOWN = "postgresql+psycopg://postgres@127.0.0.1:1/nothing-listens"


@pytest.fixture(params=["down", "not migrated"])
def broken_url(request: pytest.FixtureRequest, sqlite_url: str) -> str:
    return DOWN if request.param == "down" else sqlite_url  # an empty SQLite file: no schema


def test_every_page_and_metrics_answer_503_in_one_line(broken_url: str, caplog: pytest.LogCaptureFixture) -> None:
    settings = dashboard_settings(database_url=broken_url, metrics_token=Secret("scrape-me"))
    app = create_http_app(settings, send=lambda s, n: "t")
    caplog.set_level(logging.WARNING)
    with TestClient(app) as c:  # raises what the app does not handle
        assert c.get("/dashboard/", headers=auth()).status_code == 503  # logs in (and is remembered)
        caplog.clear()
        answers = [c.get(path, headers=auth()) for path in PAGES]
        answers.append(c.get("/metrics", headers={"Authorization": "Bearer scrape-me"}))
        answers.append(c.get("/metrics", headers=auth()))
        for answer in answers:
            assert answer.status_code == 503
            assert answer.text == "the store is unavailable" and "\n" not in answer.text
        assert c.get("/healthz").status_code == 503
    ours = [r for r in caplog.records if r.name.startswith("alma_schedule")]
    assert not any(r.exc_info for r in caplog.records)  # no traceback anywhere
    unavailable = [r for r in ours if "the store is unavailable" in r.getMessage()]
    assert len(unavailable) == len(answers)
    assert all("\n" not in r.getMessage() for r in ours)
    assert all(r.levelno == logging.WARNING for r in unavailable)
