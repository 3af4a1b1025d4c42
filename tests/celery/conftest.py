"""Celery tests: real Redis (``redis_url``), real PostgreSQL (``pg_url``) or SQLite, real workers.

``-W error`` in the pytest addopts is applied after the ini ``filterwarnings``, so the ini's ignore
of redis-py's ``setex`` deprecation (raised inside Celery's Redis result backend, in worker threads)
does not reach these tests; a per-item mark (which wins over the command line) restores it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

_CELERY_NOISE = (
    "ignore:Call to deprecated setex:DeprecationWarning",
    "ignore::DeprecationWarning:celery.*",
    "ignore::DeprecationWarning:kombu.*",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "/tests/celery/" in str(item.path).replace("\\", "/"):
            for spec in _CELERY_NOISE:
                item.add_marker(pytest.mark.filterwarnings(spec))


@pytest.fixture
def redis_client(redis_url: str) -> Iterator[Any]:
    """A redis-py client of the test's own Redis db (``redis_url``), closed after."""
    import redis

    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()
