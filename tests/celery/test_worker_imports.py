"""A worker never loads Alembic: a tick through the Celery tick task, in a fresh interpreter, claims
and publishes without importing ``alembic`` (nor Mako, which Alembic brings: about 12 MB resident and
0.4 s of start-up in every worker). ``migrate_store`` still resolves from ``alma_schedule`` and from
``alma_schedule.stores.sql``, and only then is Alembic imported (``stores/sql/__init__.py``)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from alma_schedule.stores.sql import migrate_store

CODE = """
    import json, sys
    from datetime import UTC, datetime, timedelta

    from alma_schedule import RoutineSpec, RunResult
    from alma_schedule.celery import create_app
    from alma_schedule.model import TICK_TASK
    from alma_schedule.runners.registry import KindRegistry
    from alma_schedule.settings import Settings
    from alma_schedule.tasks import composition_of

    class Probe:
        def validate(self, routine):
            return None

        def run(self, routine, handle):
            return RunResult.completed("ok")

    url, broker = sys.argv[1], sys.argv[2]
    T0 = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)
    settings = Settings(database_url=url, broker_url=broker, clock=lambda: T0 + timedelta(minutes=5))
    registry = KindRegistry(settings, builtins=False, use_entry_points=False, factories={"probe": lambda s: Probe()})
    app = create_app(settings, registry=registry)
    composition = composition_of(app)
    composition.schedule().register(RoutineSpec("acme", "bob", "r1", "probe", {"every": "5m"}, {}), now=T0)
    report = app.tasks[TICK_TASK](now=(T0 + timedelta(minutes=5)).isoformat())
    out = {"claimed": report["claimed"], "errors": report["errors"],
           "during": sorted({m.split(".")[0] for m in sys.modules} & {"alembic", "mako"})}
    from alma_schedule.stores.sql import migrate_store
    from alma_schedule import migrate_store as from_root
    out["same"] = migrate_store is from_root
    out["after"] = sorted({m.split(".")[0] for m in sys.modules} & {"alembic", "mako"})
    composition.close()
    print(json.dumps(out))
"""


def test_a_tick_in_a_fresh_worker_never_imports_alembic(tmp_path: Path, redis_url: str) -> None:
    url = f"sqlite:///{tmp_path}/w.sqlite3"
    migrate_store(url)
    script = tmp_path / "tick.py"
    script.write_text(textwrap.dedent(CODE))
    done = subprocess.run(
        [sys.executable, str(script), url, redis_url], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-4000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["claimed"] == 1 and out["errors"] == 0, out
    assert out["during"] == [], out  # the tick, the store, the Celery app: no Alembic
    assert out["same"] is True and out["after"] == ["alembic", "mako"], out
