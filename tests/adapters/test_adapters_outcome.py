"""Issue 14, defect 2, at the adapter: each failure of a real call to the fake server reports the facts
(``status_code``, ``phase``) that ``request_never_left`` decides on, and the fake bills what it did
before the answer was lost (a reset, a 504, a hang)."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from adapters_support import API_KEY, PRICE_IN, PRICE_OUT, held_port

from alma_schedule.errors import ProviderError
from alma_schedule.runners.adapters.openai import OpenAICompatibleProvider
from alma_schedule.runners.governed.outcome import request_never_left
from alma_schedule.runners.governed.protocols import BatchRequest, TurnRequest
from alma_schedule.testing.fake_openai import FakeOpenAI
from alma_schedule.testing.servers import RunningServer, serve_asgi

PROMPT = "Summarise the incidents of the night"
FIELDS: dict[str, Any] = {"org": "acme", "uid": "ana", "routine_id": "r", "run_id": "x", "prompt": PROMPT}


def turn() -> TurnRequest:
    return TurnRequest(**FIELDS, max_cost_micros=5_000, max_output_tokens=200)


def job() -> BatchRequest:
    return BatchRequest(**FIELDS, max_cost_micros=5_000, max_output_tokens=200, custom_id="alma-x")


def failure(call: Callable[[], Any]) -> ProviderError:
    with pytest.raises(ProviderError) as info:
        call()
    return info.value


def wait_for(predicate: Callable[[], Any], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


@pytest.mark.parametrize("status", [400, 401, 404, 409, 422, 429])
def test_a_4xx_other_than_408_never_left(provider: OpenAICompatibleProvider, fake: FakeOpenAI, status: int) -> None:
    fake.fail_next(status=status)
    exc = failure(lambda: provider.run_turn(turn()))
    assert (exc.status_code, exc.phase, request_never_left(exc)) == (status, None, True)
    assert fake.billed == []


@pytest.mark.parametrize("status", [408, 500, 502, 503, 504])
def test_a_5xx_or_408_after_billing_is_uncertain(
    provider: OpenAICompatibleProvider, fake: FakeOpenAI, status: int
) -> None:
    fake.fail_next(status=status, billed=True)
    exc = failure(lambda: provider.run_turn(turn()))
    assert (exc.status_code, request_never_left(exc)) == (status, False)
    assert len(fake.billed) == 1  # the provider did the work and billed it; the answer was lost


def test_a_connection_reset_after_billing_is_uncertain(provider: OpenAICompatibleProvider, fake: FakeOpenAI) -> None:
    fake.reset_next()
    exc = failure(lambda: provider.run_turn(turn()))
    assert (exc.status_code, exc.phase, request_never_left(exc)) == (None, None, False)
    assert exc.reason == "provider_error" and len(fake.billed) == 1
    assert provider.run_turn(turn()).status == "ok"  # the next call is served


def test_a_hang_after_billing_is_an_uncertain_timeout(fake_server: RunningServer, fake: FakeOpenAI) -> None:
    fake.stall_next(seconds=30, billed=True)
    with OpenAICompatibleProvider(fake_server.url, API_KEY, "m", PRICE_IN, PRICE_OUT, timeout=0.4) as p:
        exc = failure(lambda: p.run_turn(turn()))
    assert (exc.reason, exc.phase, request_never_left(exc)) == ("provider_timeout", None, False)
    assert len(fake.billed) == 1


def test_connection_refused_never_left() -> None:
    fake = FakeOpenAI()
    with held_port() as port:  # nobody listens there once the server is gone
        with serve_asgi(fake.app, port=port) as server:
            url = server.url
        with OpenAICompatibleProvider(url, API_KEY, "m", PRICE_IN, PRICE_OUT, timeout=5) as p:
            exc = failure(lambda: p.run_turn(turn()))
            assert (exc.phase, request_never_left(exc)) == ("connect", True)
            batch = failure(lambda: p.submit(job()))
            assert (batch.phase, request_never_left(batch)) == ("not_sent", True)  # the upload failed


def test_a_dns_failure_never_left() -> None:
    with OpenAICompatibleProvider("http://alma-no-such-host.invalid", API_KEY, "m", 1, 1, timeout=5) as p:
        exc = failure(lambda: p.run_turn(turn()))
    assert (exc.phase, request_never_left(exc)) == ("connect", True)


def test_a_tls_failure_before_the_request_never_left(fake_server: RunningServer, fake: FakeOpenAI) -> None:
    https = fake_server.url.replace("http://", "https://")  # the fake speaks plain HTTP: the handshake fails
    with OpenAICompatibleProvider(https, API_KEY, "m", PRICE_IN, PRICE_OUT, timeout=5) as p:
        exc = failure(lambda: p.run_turn(turn()))
    assert (exc.phase, request_never_left(exc)) == ("connect", True)
    assert fake.calls == [] and fake.billed == []


def test_a_pool_timeout_never_left(fake_server: RunningServer, fake: FakeOpenAI) -> None:
    client = httpx.Client(limits=httpx.Limits(max_connections=1))
    fake.stall_next(seconds=30, path="/v1/files")  # holds the one pooled connection

    def hold() -> None:
        with contextlib.suppress(httpx.HTTPError):  # ends when the client is closed (or the stall)
            client.post(fake_server.url + "/v1/files", timeout=30)

    holder = threading.Thread(target=hold, daemon=True)
    holder.start()
    try:
        wait_for(lambda: fake.calls_to("/v1/files"))
        with OpenAICompatibleProvider(
            fake_server.url, API_KEY, "m", PRICE_IN, PRICE_OUT, timeout=0.3, client=client
        ) as p:
            exc = failure(lambda: p.run_turn(turn()))
        assert (exc.phase, request_never_left(exc)) == ("pool", True)
        assert fake.calls_to("/v1/chat/completions") == []
    finally:
        fake.release_stalls()  # the holder's request ends now, not at the stall's 30 s
        holder.join(30)
        client.close()


def test_a_batch_creation_answered_504_after_the_batch_exists_is_uncertain(
    provider: OpenAICompatibleProvider, fake: FakeOpenAI
) -> None:
    fake.fail_next(status=504, path="/v1/batches")
    exc = failure(lambda: provider.submit(job()))
    assert (exc.status_code, request_never_left(exc)) == (504, False)
    upload = failure(lambda: (fake.fail_next(status=502, path="/v1/files"), provider.submit(job())))
    assert (upload.phase, upload.status_code, request_never_left(upload)) == ("not_sent", None, True)
