"""The chaos suite's PostgreSQL keeps what it acknowledged across its immediate restart.

``pg_ctl restart -m immediate`` is a server crash. Our at-most-once rests on the ``claimed ->
running`` CAS surviving one once it is acknowledged (the README: ``synchronous_commit`` stays on);
a cluster started with ``synchronous_commit=off`` loses the commits of its last few hundred
milliseconds, so a started fire came back ``claimed``, was re-sent by a tick and ran twice
(chaos seed 863532: ``fires_run_twice = 1``) and a finished one came back ``running``
(``running_not_stuck = 1``). The chaos may count only what our code does, not a store that
forgets what it confirmed.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import psycopg
import pytest
from chaos_servers import PgCluster

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

COMMITS = 200


def test_every_acknowledged_commit_survives_the_immediate_restart() -> None:
    root = Path(tempfile.mkdtemp(prefix="alma-chaos-pg-"))  # as chaos_run: pytest's tmp is private to root
    pg = PgCluster(root)
    try:
        pg.create()
        pg.start()
        pg.create_database()
        with psycopg.connect(pg.libpq, autocommit=True) as conn:
            conn.execute("CREATE TABLE acked (n INTEGER PRIMARY KEY)")
            for n in range(COMMITS):  # each INSERT its own acknowledged commit, the last just before the crash
                conn.execute("INSERT INTO acked (n) VALUES (%s)", (n,))
        pg.restart_immediate()
        with psycopg.connect(pg.libpq) as conn:
            row = conn.execute("SELECT count(*), max(n) FROM acked").fetchone()
            setting = conn.execute("SHOW synchronous_commit").fetchone()
        lost = f"acknowledged commits lost in the restart: {row} (synchronous_commit {setting})"
        assert row == (COMMITS, COMMITS - 1), lost
    finally:
        pg.stop()
        shutil.rmtree(root, ignore_errors=True)
