"""The dashboard in a real browser: headless Chromium (Debian's chromium + chromium-driver) driven by
Selenium 4, against serve-http's app under uvicorn over a SQLite store; the pause it makes is read
back through the CLI's ``routines list --json``.

Skipped with the reason when the binaries are missing, except under ``CI=true`` (``.ci/run``
installs them), where a missing browser fails the run. ``UPDATE_DASHBOARD_SCREENSHOT=1`` also writes the
overview's screenshot to docs/dashboard-overview.png (the README's picture).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from dashboard_support import PASSWORD_HASH, USER, OkRunner, auth

from alma_schedule.engine import create_schedule
from alma_schedule.http import create_http_app
from alma_schedule.model import Scope
from alma_schedule.settings import Secret, Settings
from alma_schedule.stores import migrate_store, open_store
from alma_schedule.testing.builders import make_routine

CHROMIUM, DRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
SCOPE = Scope("acme", "alice")
ALMA = str(Path(sys.executable).with_name("alma-schedule"))
DOCS = Path(__file__).resolve().parents[2] / "docs" / "dashboard-overview.png"


def _need_browser() -> None:
    missing = [p for p in (CHROMIUM, DRIVER) if not os.path.exists(p)]
    if not missing:
        return
    reason = f"{', '.join(missing)} missing: apt-get install -y chromium chromium-driver"
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true and {reason}")
    pytest.skip(reason)


def _wait(cond: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """serve-http's app under uvicorn on a free port, over a migrated SQLite store with 3 routines."""
    import uvicorn

    url = f"sqlite:///{tmp_path}/alma.sqlite3"
    migrate_store(url)
    store = open_store(url)
    now = datetime.now(UTC).replace(microsecond=0)
    try:
        for rid in ("morning-brief", "nightly-report", "<b>hostile</b>"):
            routine = make_routine(
                rid, scope=SCOPE, registered_at=now - timedelta(hours=1), next_due_at=now - timedelta(seconds=30)
            )
            store.put_routine(routine, now=now - timedelta(hours=1))
        engine = create_schedule(store=store, runner=OkRunner())
        for _ in range(2):  # real ticks (in-process runs): the overview's tick log and ledger
            engine.tick()
    finally:
        store.close()
    settings = Settings(
        database_url=url,
        http_secret=Secret("tick-secret-of-the-clock"),
        dashboard_user=USER,
        dashboard_password_hash=Secret(PASSWORD_HASH),
        dashboard_scopes="*",
        dashboard_read_only=False,
    )
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(create_http_app(settings), log_level="warning", lifespan="on"))
    thread = threading.Thread(target=lambda: server.run(sockets=[sock]), daemon=True)
    thread.start()
    try:
        _wait(lambda: server.started, 30, "uvicorn started")
        yield f"http://127.0.0.1:{sock.getsockname()[1]}", url
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()


def _browser() -> Any:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,1000"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(DRIVER), options=options)
    driver.set_page_load_timeout(60)
    return driver


def test_log_in_see_the_routines_pause_one_and_the_cli_sees_it_paused(served: tuple[str, str], tmp_path: Path) -> None:
    _need_browser()
    from selenium.webdriver.common.by import By

    base, url = served
    driver = _browser()
    try:
        driver.get(base + "/dashboard/")  # no credentials: the server asks (Chromium's login prompt)
        assert "Clock health" not in driver.page_source
        driver.execute_cdp_cmd("Network.enable", {})
        driver.execute_cdp_cmd("Network.setExtraHTTPHeaders", {"headers": auth()})
        driver.get(base + "/dashboard/?scope=acme/alice")
        assert "Clock health" in driver.page_source and "clock ok" in driver.page_source
        assert "ticks in the last hour: 2" in driver.find_element(By.TAG_NAME, "main").text
        driver.save_screenshot(str(tmp_path / "dashboard-overview.png"))
        if os.environ.get("UPDATE_DASHBOARD_SCREENSHOT") == "1":
            shutil.copy(tmp_path / "dashboard-overview.png", DOCS)

        driver.get(base + "/dashboard/routines?scope=acme/alice")
        cells = [td.text for td in driver.find_elements(By.CSS_SELECTOR, "tbody tr td:first-child")]
        assert cells == ["<b>hostile</b>", "morning-brief", "nightly-report"]  # the id as text, not markup
        driver.save_screenshot(str(tmp_path / "dashboard-routines.png"))

        driver.find_element(By.LINK_TEXT, "morning-brief").click()
        assert "Next fires" in driver.page_source
        driver.find_element(By.LINK_TEXT, "pause").click()
        reason = driver.find_element(By.NAME, "reason")
        reason.clear()
        reason.send_keys("browser maintenance")
        driver.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
        _wait(lambda: "pause done" in driver.page_source, 30, "the pause's result page")
        driver.save_screenshot(str(tmp_path / "dashboard-paused.png"))
    finally:
        driver.quit()

    env = {**os.environ, "ALMA_DATABASE_URL": url}
    done = subprocess.run(
        [ALMA, "routines", "list", "acme/alice", "--json"], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    rows = {r["routine_id"]: r for r in json.loads(done.stdout)}
    assert rows["morning-brief"]["paused_reason"] == "browser maintenance"
    assert rows["nightly-report"]["paused_reason"] is None
    assert (tmp_path / "dashboard-paused.png").stat().st_size > 0
