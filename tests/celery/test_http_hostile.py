"""``serve-http`` against hostile input (issue 14, defect 9), through a real uvicorn server and the
real Redis: malformed bodies answer 400 with a JSON error (never 500) and enqueue nothing; the
secret is the header's bytes against the secret's UTF-8 bytes (a non-ASCII secret sent as UTF-8
matches, its latin-1 form does not); a secret under 16 bytes is refused at start, naming it."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import httpx
import pytest
import redis
from celery_support import ALMA, make_settings
from test_http_and_clock import Server, _env

from alma_schedule.errors import ConfigurationError
from alma_schedule.http import SECRET_HEADER, create_http_app
from alma_schedule.settings import Secret

pytestmark = [pytest.mark.redis]

SECRET = "clé-secrète-ünïcødé"  # 16 characters, 23 bytes in UTF-8

MALFORMED: list[bytes] = [
    b"[" * 3000,
    b"{" * 3000,
    b'{"now": ' * 1000,
    b"not json",
    b"\xff\xfe\x00",
    b"[]",
    b"null",
    b'"now"',
    b"42",
    b'{"now": 5}',
    b'{"now": ["2026-01-01T00:00:00Z"]}',
    b'{"now": {"at": 1}}',
    b'{"now": NaN}',
    b'{"now": Infinity}',
    b'{"now": 1e999}',
    b'{"now": "2026-01-01T00:00:00Z", "extra": 1}',
    b'{"later": "2026-01-01T00:00:00Z"}',
    b'{"now": "2026-13-45T00:00:00Z"}',
    b'{"now": "2026-01-01T00:00:00"}',
    b'{"now": "\\ud800"}',
    b'{"now": "\\u0000"}',
    b'{"now": "0001-01-01T00:00:00+14:00"}',
    b'{"now": "9999-12-31T23:59:59-14:00"}',
    b'{"now": "' + "é".encode() * 1500 + b'"}',
]


@pytest.fixture
def base(sqlite_url: str, redis_url: str) -> Iterator[str]:
    settings = make_settings(sqlite_url, redis_url, http_secret=Secret(SECRET), http_max_body=8192)
    with Server(create_http_app(settings)) as url:
        yield url


def test_malformed_bodies_answer_400_with_a_json_error_and_send_nothing(base: str, redis_client: redis.Redis) -> None:
    r = redis_client
    headers = {SECRET_HEADER: SECRET.encode("utf-8")}
    with httpx.Client(base_url=base, timeout=30) as client:
        answers = {body[:40]: client.post("/tick", headers=headers, content=body) for body in MALFORMED}
        assert {k: a.status_code for k, a in answers.items()} == dict.fromkeys(answers, 400)
        assert all(isinstance(a.json()["error"], str) and a.json()["error"] for a in answers.values())
        assert r.llen("alma.tick") == 0  # nothing refused was enqueued
        good = client.post("/tick", headers=headers, content=b'{"now": "2026-01-01T00:00:00+02:00"}')
        assert good.status_code == 202 and good.json()["task_id"]
        assert r.llen("alma.tick") == 1


def test_a_non_ascii_secret_sent_as_utf8_matches_and_its_latin1_form_does_not(
    base: str, redis_client: redis.Redis
) -> None:
    r = redis_client
    with httpx.Client(base_url=base, timeout=30) as client:
        assert client.post("/tick", headers={SECRET_HEADER: SECRET.encode("utf-8")}).status_code == 202
        assert client.post("/tick", headers={SECRET_HEADER: SECRET.encode("latin-1")}).status_code == 401
        assert client.post("/tick", headers={SECRET_HEADER: SECRET.encode("utf-8")[:-1]}).status_code == 401
        assert client.post("/tick", headers={SECRET_HEADER: b"\xff" * 23}).status_code == 401
    assert r.llen("alma.tick") == 1


@pytest.mark.parametrize("secret", ["x", "fifteen-bytes!!", "ünïcødé"])  # 1, 15 and 14 bytes
def test_a_secret_under_16_bytes_is_refused_at_start_naming_the_setting(secret: str, redis_url: str) -> None:
    with pytest.raises(ConfigurationError, match="ALMA_HTTP_SECRET") as refused:
        create_http_app(make_settings("sqlite://", redis_url, http_secret=Secret(secret)))
    assert "\n" not in str(refused.value)
    create_http_app(make_settings("sqlite://", redis_url, http_secret=Secret("sixteen-bytes!!!")))
    done = subprocess.run(
        [ALMA, "serve-http"],
        env={**_env(redis_url), "ALMA_HTTP_SECRET": secret},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "ALMA_HTTP_SECRET" in lines[0], done.stderr
