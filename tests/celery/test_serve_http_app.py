"""``alma-schedule -A fleet serve-http`` sends ``POST /tick`` through the fleet app's broker, like every other
command: no ``ALMA_BROKER_URL`` is needed where the app called ``install(app)``. A real server process, real
Redis; the example secret of docs/dashboard.md is one the server accepts."""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx
import pytest
import redis
from celery_support import ALMA, Procs, reserved_port, wait_for
from fleet_project import alma, clean_env, write_fleet

pytestmark = [pytest.mark.redis, pytest.mark.slow]

#: The dashboard's page of the documentation site, whose serve-http example this test runs.
DASHBOARD_PAGE = (Path(__file__).resolve().parents[2] / "docs" / "dashboard.md").read_text()


def test_serve_http_sends_through_the_fleets_broker_with_the_readmes_secret(tmp_path: Path, redis_url: str) -> None:
    secret = re.search(r"ALMA_HTTP_SECRET=(\S+) alma-schedule -A proj serve-http", DASHBOARD_PAGE)
    assert secret is not None, "docs/dashboard.md's serve-http example"
    conf = {"alma_database_url": f"sqlite:///{tmp_path}/store.sqlite3"}
    root = write_fleet(tmp_path / "proj", broker=redis_url, conf=conf)
    env = clean_env(ALMA_HTTP_SECRET=secret.group(1))  # no ALMA_BROKER_URL: the app's broker
    assert alma(root, "-A", "fleet", "migrate", env=env).returncode == 0
    procs = Procs(tmp_path)
    try:
        with reserved_port() as port:
            procs.start("http", [ALMA, "-A", "fleet", "serve-http", "--port", str(port)], env, cwd=root)
            base = f"http://127.0.0.1:{port}"

            def posted() -> httpx.Response | None:
                assert procs.procs[0][1].poll() is None, procs.log("http")[-3000:]
                try:
                    return httpx.post(f"{base}/tick", headers={"X-Alma-Secret": secret.group(1)}, timeout=10)
                except httpx.TransportError:
                    return None

            answer = wait_for(posted, 60, 0.2, "serve-http answered POST /tick")
            assert answer.status_code == 202, answer.text
        ticks = [json.loads(m) for m in redis.Redis.from_url(redis_url).lrange("alma.tick", 0, -1)]
        assert [t["headers"]["id"] for t in ticks] == [answer.json()["task_id"]]
    finally:
        procs.stop_all()
