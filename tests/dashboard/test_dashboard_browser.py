"""The dashboard in a real browser: headless Chromium (Debian's chromium + chromium-driver) driven by
Selenium 4, against serve-http's app under uvicorn over a SQLite store; the pause it makes is read
back through the CLI's ``routines list --json``.

Skipped with the reason when the binaries are missing, except under ``CI=true`` (``.ci/run``
installs them), where a missing browser fails the run. ``UPDATE_DASHBOARD_SCREENSHOT=1`` (what
``scripts/screenshots`` sets) also writes the pages' screenshots into docs/ (docs/dashboard.md's
pictures). The pages' computed style is checked: the stylesheet is served from
``/dashboard/static/`` under the Content-Security-Policy.

The fleet test (issue 51) serves a demo store at a fixed ``now`` (2027-03-27 12:00 UTC: Europe/Lisbon
changes to summer time within the next 24 h): a ``*`` user reaches a routine from the overview by
clicks only, finds each chart with as many marks as the data behind it, pauses the routine and sees
it paused on its page.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from dashboard_support import PASSWORD_HASH, USER, OkRunner, auth, wait_until

from alma_schedule.engine import create_schedule
from alma_schedule.http import create_http_app
from alma_schedule.model import Scope
from alma_schedule.settings import Secret, Settings
from alma_schedule.stores import migrate_store, open_store
from alma_schedule.testing.builders import make_routine

CHROMIUM, DRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
SCOPE = Scope("acme", "alice")
ALMA = str(Path(sys.executable).with_name("alma-schedule"))
DOCS_DIR = Path(__file__).resolve().parents[2] / "docs"
DOCS = DOCS_DIR / "dashboard-overview.png"


def _need_browser() -> None:
    missing = [p for p in (CHROMIUM, DRIVER) if not os.path.exists(p)]
    if not missing:
        return
    reason = f"{', '.join(missing)} missing: apt-get install -y chromium chromium-driver"
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true and {reason}")
    pytest.skip(reason)


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
        wait_until(lambda: server.started, 30, "uvicorn started")
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
        # the stylesheet is /dashboard/static/dashboard.css under the CSP (style-src 'self'): it still applies
        assert (
            driver.find_element(By.TAG_NAME, "nav").value_of_css_property("background-color") == "rgba(29, 35, 48, 1)"
        )
        who = driver.find_element(By.CSS_SELECTOR, "nav .who")
        assert who.value_of_css_property("color") == "rgba(170, 170, 187, 1)"
        driver.save_screenshot(str(tmp_path / "dashboard-overview.png"))
        if os.environ.get("UPDATE_DASHBOARD_SCREENSHOT") == "1":
            shutil.copy(tmp_path / "dashboard-overview.png", DOCS)

        driver.get(base + "/dashboard/routines?scope=acme/alice")
        cells = [td.text for td in driver.find_elements(By.CSS_SELECTOR, "tbody tr td:nth-child(2)")]
        assert cells == ["<b>hostile</b>", "morning-brief", "nightly-report"]  # the id as text, not markup
        driver.save_screenshot(str(tmp_path / "dashboard-routines.png"))

        driver.find_element(By.LINK_TEXT, "morning-brief").click()
        assert "Next fires" in driver.page_source
        driver.find_element(By.LINK_TEXT, "pause").click()
        reason = driver.find_element(By.NAME, "reason")
        reason.clear()
        reason.send_keys("browser maintenance")
        driver.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
        wait_until(lambda: "pause done" in driver.page_source, 30, "the pause's result page")
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


#: The fleet test's fixed instant: Europe/Lisbon moves from +00:00 to +01:00 at 2027-03-28 01:00 UTC.
NOW = datetime(2027, 3, 27, 12, 0, tzinfo=UTC)
FLEET = {
    Scope("acme", "alice"): {
        "morning-brief": {"every": "15m"},
        "lisbon-digest": {"cron": "0 2 * * *", "tz": "Europe/Lisbon"},
    },
    Scope("globex", "ops"): {"hourly-sync": {"cron": "0 * * * *"}, "quarter-check": {"cron": "*/15 * * * *"}},
}


@pytest.fixture
def fleet_served(tmp_path: Path) -> Iterator[tuple[str, Any]]:
    """A demo fleet (two orgs) on SQLite, two real ticks 15 minutes apart, served at ``NOW``."""
    import uvicorn

    from alma_schedule.model.time import SettableTime

    url = f"sqlite:///{tmp_path}/fleet.sqlite3"
    migrate_store(url)
    store = open_store(url)
    clock = SettableTime(NOW - timedelta(minutes=15))
    try:
        for scope, routines in FLEET.items():
            for rid, schedule in routines.items():
                routine = make_routine(
                    rid, scope=scope, schedule=schedule, registered_at=NOW - timedelta(hours=1),
                    next_due_at=NOW - timedelta(minutes=15),
                )  # fmt: skip
                store.put_routine(routine, now=NOW - timedelta(hours=1))
        engine = create_schedule(store=store, runner=OkRunner(), settings=Settings(clock=clock))
        engine.tick()
        clock.advance(timedelta(minutes=15))
        engine.tick()
        runs = len(store.list_runs(Scope("acme", "alice"), routine_id="morning-brief"))
        minutes = len(store.tick_log(1440))
    finally:
        store.close()
    settings = Settings(
        database_url=url,
        http_secret=Secret("tick-secret-of-the-clock"),
        dashboard_user=USER,
        dashboard_password_hash=Secret(PASSWORD_HASH),
        dashboard_scopes="*",
        dashboard_read_only=False,
        clock=clock,
    )
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(create_http_app(settings), log_level="warning", lifespan="on"))
    thread = threading.Thread(target=lambda: server.run(sockets=[sock]), daemon=True)
    thread.start()
    try:
        wait_until(lambda: server.started, 30, "uvicorn started")
        yield f"http://127.0.0.1:{sock.getsockname()[1]}", {"runs": runs, "minutes": minutes}
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()


def _shot(driver: Any, tmp_path: Path, name: str) -> None:
    height = driver.execute_script("return document.documentElement.scrollHeight")  # the whole page
    driver.set_window_size(1400, min(int(height) + 120, 4000))
    driver.save_screenshot(str(tmp_path / name))
    driver.set_window_size(1400, 1000)
    if os.environ.get("UPDATE_DASHBOARD_SCREENSHOT") == "1":
        shutil.copy(tmp_path / name, DOCS_DIR / name)


def test_a_fleet_user_reaches_a_routine_by_clicks_pauses_it_and_sees_each_chart(
    fleet_served: tuple[str, Any], tmp_path: Path
) -> None:
    _need_browser()
    from selenium.webdriver.common.by import By

    base, facts = fleet_served
    assert facts["runs"] == 2 and facts["minutes"] == 2
    driver = _browser()
    try:
        driver.execute_cdp_cmd("Network.enable", {})
        driver.execute_cdp_cmd("Network.setExtraHTTPHeaders", {"headers": auth()})
        driver.get(base + "/dashboard/")  # the one URL typed: the overview, no scope
        # clock health: one bar per logged minute, both lag lines drawn
        assert len(driver.find_elements(By.CSS_SELECTOR, "svg rect.tick")) == facts["minutes"]
        assert driver.find_elements(By.CSS_SELECTOR, "svg polyline.p95")
        # the next 24 h of the fleet: the DST night named, cells for the minutes that fire
        strip = driver.find_element(By.XPATH, "//h2[starts-with(., 'The next 24 h')]/following-sibling::figure[1]")
        title = strip.find_element(By.TAG_NAME, "title").get_attribute("textContent")
        fires = strip.find_elements(By.CSS_SELECTOR, "rect.fire")
        # every 15 min (96), hourly (24, all on quarter-hours) and */15 (96) share 96 minutes; 02:00 Lisbon too
        assert len(fires) == 96 and "Fires per minute, the next 24 h" in title
        assert "DST Europe/Lisbon 01:00 UTC: 01:00 → 02:00 local (+00:00 → +01:00)" in strip.text
        assert "02:00 Europe/Lisbon: 1 fire" in driver.find_element(By.TAG_NAME, "main").text
        _shot(driver, tmp_path, "dashboard-overview.png")

        driver.find_element(By.LINK_TEXT, "Scopes").click()
        assert "acme/alice" in driver.page_source and "globex/ops" in driver.page_source
        _shot(driver, tmp_path, "dashboard-scopes.png")
        driver.find_element(By.LINK_TEXT, "Overview").click()

        # the overview's count of enabled routines links to the list behind it
        count = driver.find_element(By.XPATH, "//td[.='enabled']/following-sibling::td/a")
        assert count.text == "4"
        count.click()
        scopes = [td.text for td in driver.find_elements(By.CSS_SELECTOR, "tbody tr td:first-child")]
        assert scopes == ["acme/alice", "acme/alice", "globex/ops", "globex/ops"]
        _shot(driver, tmp_path, "dashboard-routines.png")
        driver.find_element(By.LINK_TEXT, "morning-brief").click()

        runs = driver.find_elements(By.CSS_SELECTOR, "svg rect.run")
        assert len(runs) == facts["runs"] and all("run completed" in r.get_attribute("class") for r in runs)
        assert len(driver.find_elements(By.CSS_SELECTOR, "svg path.fire")) == 10  # its next fires on an axis
        titles = [t.get_attribute("textContent") for t in driver.find_elements(By.CSS_SELECTOR, "svg > title")]
        assert any(t.startswith("Runs over time: 2 runs") for t in titles)
        assert any(t.startswith("The next 10 fires") for t in titles)
        _shot(driver, tmp_path, "dashboard-routine.png")

        driver.find_element(By.LINK_TEXT, "pause").click()
        reason = driver.find_element(By.NAME, "reason")
        reason.clear()
        reason.send_keys("browser maintenance")
        driver.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
        wait_until(lambda: "pause done" in driver.page_source, 30, "the pause's result page")
        driver.find_element(By.LINK_TEXT, "back to the routine").click()
        main = driver.find_element(By.TAG_NAME, "main").text
        assert "paused (browser maintenance): no fire until it is resumed" in main
        assert "resumes at the next fire after resume" in main
        assert not driver.find_elements(By.CSS_SELECTOR, "svg path.fire")  # no fire that will not happen
        assert len(driver.find_elements(By.CSS_SELECTOR, "svg rect.span")) == 1  # the pause, from the audit trail
        _shot(driver, tmp_path, "dashboard-paused.png")
    finally:
        driver.quit()
