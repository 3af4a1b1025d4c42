from __future__ import annotations
import gc
import psycopg
from test_worker_inprocess import ready_app, register_due, make_settings, Recorder, composition_of, migrate_store

def test_a(pg_url: str, redis_url: str) -> None:
    migrate_store(pg_url)
    settings = make_settings(pg_url, redis_url)
    app = ready_app(settings, Recorder())
    register_due(app, 5)
    composition_of(app).close()
    gc.collect()
    live = [o for o in gc.get_objects() if isinstance(o, psycopg.Connection) and not o.closed]
    import sys
    for o in live:
        print("LIVE", o, [type(r).__name__ for r in gc.get_referrers(o)], file=sys.stderr)
    assert not live
