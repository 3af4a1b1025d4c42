"""The private shape of kombu that :mod:`alma_schedule.compat.kombu` relies on, held against the
INSTALLED kombu (no mock): ``Connection._reraise_as_library_errors`` turns a transport's
recoverable error into kombu's ``OperationalError``, as Celery's ``send_task`` relies on, on the
memory and the Redis transports' own error classes (no server: a kombu connection connects lazily)."""

from __future__ import annotations

import inspect

import kombu
import pytest
import redis
from kombu.exceptions import OperationalError

from alma_schedule.compat.kombu import reraise_as_library_errors

pytestmark = pytest.mark.unit


def test_the_context_manager_is_there() -> None:
    params = inspect.signature(kombu.Connection._reraise_as_library_errors).parameters
    assert list(params)[:1] == ["self"]
    assert all(p.default is not inspect.Parameter.empty for p in list(params.values())[1:])


@pytest.mark.parametrize("url", ["memory://", "redis://127.0.0.1:1/0"])
def test_a_recoverable_connection_error_leaves_as_kombus_operational_error(url: str) -> None:
    conn = kombu.Connection(url)
    try:
        error = conn.recoverable_connection_errors[0]
        with pytest.raises(OperationalError) as caught, reraise_as_library_errors(conn):
            raise error("the broker went away")
        assert isinstance(caught.value.__cause__, error)
        assert "the broker went away" in str(caught.value)
    finally:
        conn.release()


def test_redis_errors_are_recoverable_and_become_operational_errors() -> None:
    conn = kombu.Connection("redis://127.0.0.1:1/0")
    try:
        assert redis.exceptions.ConnectionError in conn.recoverable_connection_errors
        with pytest.raises(OperationalError) as caught, reraise_as_library_errors(conn):
            raise redis.exceptions.ConnectionError("Connection refused")
        assert isinstance(caught.value.__cause__, redis.exceptions.ConnectionError)
    finally:
        conn.release()


def test_other_errors_pass_through_unchanged() -> None:
    conn = kombu.Connection("memory://")
    try:
        with pytest.raises(ValueError, match="ours"), reraise_as_library_errors(conn):
            raise ValueError("ours")
        with pytest.raises(OperationalError), reraise_as_library_errors(conn):
            raise OperationalError("already kombu's")
        with reraise_as_library_errors(conn):
            pass
    finally:
        conn.release()
