from __future__ import annotations
from test_worker_inprocess import *  # noqa

def test_a(pg_url: str, redis_url: str) -> None:
    migrate_store(pg_url)
    settings = make_settings(pg_url, redis_url)
    app = ready_app(settings, Recorder())
    register_due(app, 5)
    composition_of(app).close()

def test_b(pg_url: str, redis_url: str) -> None:
    migrate_store(pg_url)
    settings = make_settings(pg_url, redis_url)
    app = ready_app(settings, Recorder())
    register_due(app, 5)
    with inprocess_worker(app, ["alma.run"]):
        pass
    composition_of(app).close()
