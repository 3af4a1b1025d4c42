"""A plain ``celery -A fleet worker`` (no ``-Q``) of a fleet that called ``install(app)``: a JSON-only app's
worker also serves alma.run and alma.collect (never alma.tick); an app that accepts pickle is told in one
line to serve them from a worker of their own, and they are not added. Real workers on real Redis."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import redis
from celery_support import CELERY, Procs, wait_for, wait_worker_ready
from fleet_project import alma, clean_env, write_fleet

pytestmark = [pytest.mark.redis, pytest.mark.slow]

ADDS = ["--kind", "task", "--schedule", '{"every": "1h"}', "--definition", '{"task": "fleet.add", "args": [1, 2]}']
PLAIN = ["worker", "-c", "1", "-n", "plain@%h", "--loglevel", "INFO", "--without-mingle", "--without-gossip"]


def banner_queues(log: str) -> set[str]:
    """The queue names of the worker's start banner (``.> NAME exchange=...``)."""
    return {line.split()[1] for line in log.splitlines() if line.strip().startswith(".> ")}


def start_plain(tmp_path: Path, root: Path) -> Procs:
    procs = Procs(tmp_path)
    env = clean_env(C_FORCE_ROOT="1")  # Celery refuses a pickle worker as root (these tests may run as root)
    procs.start("plain", [CELERY, "-A", "fleet", *PLAIN], env, cwd=root)
    wait_worker_ready(procs, "plain", 60)
    return procs


def test_a_json_only_fleets_plain_worker_serves_run_and_collect(tmp_path: Path, redis_url: str) -> None:
    conf = {"alma_database_url": f"sqlite:///{tmp_path}/store.sqlite3"}
    root = write_fleet(tmp_path / "proj", broker=redis_url, conf=conf)
    env = clean_env()
    for args in (["migrate"], ["routines", "add", "acme/ops", "adds", *ADDS], ["clock", "send"]):
        assert alma(root, "-A", "fleet", *args, env=env).returncode == 0, args
    procs = start_plain(tmp_path, root)
    try:
        log = procs.log("plain")
        assert {"alma.run", "alma.collect", "celery"} <= banner_queues(log), log
        assert "alma.tick" not in banner_queues(log)
        assert "this worker (no -Q) also serves alma.run, alma.collect" in log
        assert alma(root, "-A", "fleet", "routines", "trigger", "acme/ops", "adds", env=env).returncode == 0

        def completed() -> bool:
            done = alma(root, "-A", "fleet", "runs", "list", "acme/ops", "--json", env=env)
            return [r["state"] for r in json.loads(done.stdout)] == ["completed"]

        wait_for(completed, 60, 0.5, "the triggered run completed on the plain worker")
        assert redis.Redis.from_url(redis_url).llen("alma.tick") == 1  # the tick waits for the tick worker
    finally:
        procs.stop_all()


def test_a_pickle_fleets_plain_worker_is_told_in_one_line_and_serves_none_of_ours(
    tmp_path: Path, redis_url: str
) -> None:
    conf = {"alma_database_url": f"sqlite:///{tmp_path}/store.sqlite3", "accept_content": ["json", "pickle"]}
    root = write_fleet(tmp_path / "proj", broker=redis_url, conf=conf)
    procs = start_plain(tmp_path, root)
    try:
        log = procs.log("plain")
        told = [line for line in log.splitlines() if "accepts more than JSON" in line]
        assert len(told) == 1, log
        assert "serve them from a worker of their own" in told[0]
        assert "celery -A alma_schedule.celery worker -Q alma.run,alma.collect -n alma@%h" in told[0]
        assert banner_queues(log) == {"celery"}, log
    finally:
        procs.stop_all()


def test_a_worker_given_dash_q_is_left_as_given(tmp_path: Path, redis_url: str) -> None:
    conf = {"alma_database_url": f"sqlite:///{tmp_path}/store.sqlite3"}
    root = write_fleet(tmp_path / "proj", broker=redis_url, conf=conf)
    procs = Procs(tmp_path)
    argv = [CELERY, "-A", "fleet", "worker", "-Q", "celery", *PLAIN[1:]]
    procs.start("plain", argv, clean_env(), cwd=root)
    try:
        wait_worker_ready(procs, "plain", 60)
        assert banner_queues(procs.log("plain")) == {"celery"}
    finally:
        procs.stop_all()


def test_a_plain_worker_of_a_fleet_with_no_store_says_so_and_serves_none_of_ours(
    tmp_path: Path, redis_url: str
) -> None:
    root = write_fleet(tmp_path / "proj", broker=redis_url)  # install(app), no alma_database_url
    procs = start_plain(tmp_path, root)
    try:
        log = procs.log("plain")
        told = [line for line in log.splitlines() if "no store is configured" in line]
        assert len(told) == 1 and "alma_database_url" in told[0] and "ALMA_DATABASE_URL" in told[0], log
        assert banner_queues(log) == {"celery"}, log
        assert sorted(p.name for p in root.iterdir() if "sqlite" in p.name) == []  # no file of its own
    finally:
        procs.stop_all()
