"""OpenAICompatibleProvider against the fake OpenAI server on 127.0.0.1 (real HTTP, real httpx)."""

from __future__ import annotations

import json
import logging
from datetime import timedelta
from typing import Any

import pytest
from adapters_support import API_KEY, PRICE_IN, PRICE_OUT, expected_cost, held_port

from alma_schedule.errors import ConfigurationError, ProviderError
from alma_schedule.runners.adapters.openai import OpenAICompatibleProvider, input_token_bound
from alma_schedule.runners.governed.protocols import (
    BatchProvider,
    BatchRequest,
    ConversationProvider,
    TurnRequest,
)
from alma_schedule.settings import Secret, Settings
from alma_schedule.testing.fake_openai import FakeOpenAI, count_tokens
from alma_schedule.testing.servers import RunningServer, serve_asgi

PROMPT = "Write the morning briefing for the platform team: incidents, deploys and reviews"


def turn(prompt: str = PROMPT, **kw: object) -> TurnRequest:
    return TurnRequest("acme", "u1", "brief", "2026-01-05T08:00:00Z", prompt, custom_id="key-1", **kw)  # type: ignore[arg-type]


def job(prompt: str = PROMPT, **kw: object) -> BatchRequest:
    return BatchRequest("acme", "u1", "digest", "2026-01-05T02:00:00Z", prompt, "key-job-1", **kw)  # type: ignore[arg-type]


def test_implements_both_provider_protocols(provider: OpenAICompatibleProvider) -> None:
    assert isinstance(provider, ConversationProvider)
    assert isinstance(provider, BatchProvider)


# ---------------------------------------------------------------------------- turns


def test_turn_ok_returns_the_reply_and_usage_times_prices(provider: OpenAICompatibleProvider, fake: FakeOpenAI) -> None:
    receipt = provider.run_turn(turn())

    (call,) = fake.calls_to("/v1/chat/completions")
    assert call.headers["authorization"] == f"Bearer {API_KEY}"
    assert call.headers["x-client-request-id"] == "key-1"
    assert call.json["model"] == "fake-model"
    assert call.json["messages"] == [{"role": "user", "content": PROMPT}]
    assert "max_tokens" in call.json  # the model's output cap, even without a cost bound
    reply = call.response["choices"][0]["message"]["content"]
    usage = call.response["usage"]
    assert receipt.status == "ok"
    assert receipt.text == reply
    assert receipt.turn_id == call.response["id"]
    assert usage["prompt_tokens"] > 0 and usage["completion_tokens"] > 0
    assert receipt.cost_micros == expected_cost(usage)
    assert receipt.cost_micros > 0


def test_cost_rounds_up_to_whole_micro_usd(fake_server: RunningServer, fake: FakeOpenAI) -> None:
    # 1 micro-USD per million tokens: any non-empty usage costs exactly 1 micro-USD after rounding up.
    with OpenAICompatibleProvider(fake_server.url, API_KEY, "m", 1, 1, timeout=10) as p:
        receipt = p.run_turn(turn())
    usage = fake.calls_to("/v1/chat/completions")[0].response["usage"]
    assert usage["total_tokens"] < 1_000_000
    assert receipt.cost_micros == 1


def test_max_tokens_is_derived_from_the_hard_cost_bound(provider: OpenAICompatibleProvider, fake: FakeOpenAI) -> None:
    messages = [{"role": "user", "content": PROMPT}]
    in_bound = input_token_bound(messages)
    assert in_bound >= 2 * len(PROMPT.split())  # an upper bound, far above the fake's words * 1.3
    for bound in (70, 100, 200, 1_000, 5_000):
        receipt = provider.run_turn(turn(max_cost_micros=bound))
        sent = fake.calls[-1].json["max_tokens"]
        assert sent == min(16_384, (bound * 1_000_000 - in_bound * PRICE_IN) // PRICE_OUT)
        usage = fake.calls[-1].response["usage"]
        assert usage["completion_tokens"] <= sent
        assert receipt.cost_micros == expected_cost(usage) <= bound


def test_a_tight_bound_truncates_the_answer_and_still_holds(
    provider: OpenAICompatibleProvider, fake: FakeOpenAI
) -> None:
    in_cost = input_token_bound([{"role": "user", "content": PROMPT}]) * PRICE_IN
    bound = -(-(in_cost + 5 * PRICE_OUT) // 1_000_000)  # room for about five output tokens
    receipt = provider.run_turn(turn(max_cost_micros=bound))
    call = fake.calls[-1]
    assert 5 <= call.json["max_tokens"] < 10
    assert call.response["choices"][0]["finish_reason"] == "length"
    assert count_tokens(receipt.text) <= call.json["max_tokens"]
    assert receipt.cost_micros <= bound


def test_max_output_tokens_caps_the_bound(provider: OpenAICompatibleProvider, fake: FakeOpenAI) -> None:
    provider.run_turn(turn(max_cost_micros=1_000_000, max_output_tokens=7))
    assert fake.calls[-1].json["max_tokens"] == 7
    provider.run_turn(turn(max_output_tokens=3))  # no cost bound: the request's own cap
    assert fake.calls[-1].json["max_tokens"] == 3


def test_a_bound_below_the_input_is_not_admitted_without_any_call(
    provider: OpenAICompatibleProvider, fake: FakeOpenAI
) -> None:
    receipt = provider.run_turn(turn(max_cost_micros=1))
    assert receipt.status == "not_admitted"
    assert receipt.cost_micros == 0
    assert fake.calls == []
    with pytest.raises(ProviderError) as info:
        provider.submit(job(max_cost_micros=1))
    assert info.value.reason == "not_admitted"
    assert fake.calls == []


@pytest.mark.parametrize("status", [429, 500, 502, 503])
def test_rate_limits_and_server_errors_are_provider_error(
    provider: OpenAICompatibleProvider, fake: FakeOpenAI, status: int
) -> None:
    fake.fail_next(status=status)
    with pytest.raises(ProviderError) as info:
        provider.run_turn(turn())
    assert info.value.reason == "provider_error"
    assert f"HTTP {status}" in str(info.value)
    assert "injected" not in str(info.value)  # the body's free text never reaches the message
    if status == 429:
        assert "rate_limit_exceeded" in str(info.value)
    assert len(fake.calls) == 1  # no retry inside the adapter
    assert provider.run_turn(turn()).status == "ok"  # the fault was one call only


def test_a_stalled_call_is_provider_timeout(fake_server: RunningServer, fake: FakeOpenAI) -> None:
    fake.stall_next(seconds=10)
    with OpenAICompatibleProvider(fake_server.url, API_KEY, "m", PRICE_IN, PRICE_OUT, timeout=0.4) as p:
        with pytest.raises(ProviderError) as info:
            p.run_turn(turn())
    assert info.value.reason == "provider_timeout"
    assert "timed out" in str(info.value)


def test_an_unreachable_server_is_provider_error() -> None:
    fake = FakeOpenAI()
    with held_port() as port:  # the port stays ours after the server is gone: nobody else listens there
        with serve_asgi(fake.app, port=port) as server:
            url = server.url
        with OpenAICompatibleProvider(url, API_KEY, "m", PRICE_IN, PRICE_OUT, timeout=2) as p:
            with pytest.raises(ProviderError) as info:
                p.run_turn(turn())
    assert info.value.reason == "provider_error"
    assert "ConnectError" in str(info.value)


def test_a_wrong_key_is_provider_error(fake_server: RunningServer, fake: FakeOpenAI) -> None:
    with OpenAICompatibleProvider(fake_server.url, "sk-wrong", "m", PRICE_IN, PRICE_OUT, timeout=10) as p:
        with pytest.raises(ProviderError) as info:
            p.run_turn(turn())
    assert info.value.reason == "provider_error"
    assert "HTTP 401" in str(info.value) and "invalid_api_key" in str(info.value)


def test_a_base_url_with_v1_is_normalised() -> None:
    fake = FakeOpenAI(reply_fn=lambda prompt, seq: "")
    with (
        serve_asgi(fake.app) as server,
        OpenAICompatibleProvider(server.url + "/v1/", API_KEY, "m", PRICE_IN, PRICE_OUT, timeout=10) as p,
    ):
        receipt = p.run_turn(turn())
    assert receipt.status == "ok" and receipt.text == ""
    assert fake.calls[-1].path == "/v1/chat/completions"


@pytest.mark.parametrize("answer", [b"not json", b'{"choices": []}', b"[1, 2]"])
def test_an_answer_that_is_not_a_completion_is_provider_error(answer: bytes) -> None:
    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        headers = [(b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": answer})

    with (
        serve_asgi(app) as server,
        OpenAICompatibleProvider(server.url, API_KEY, "m", PRICE_IN, PRICE_OUT, timeout=10) as p,
    ):
        with pytest.raises(ProviderError) as info:
            p.run_turn(turn())
    assert info.value.reason == "provider_error"
    assert "not json" not in str(info.value)


# ---------------------------------------------------------------------------- batches


def test_batch_lifecycle_submit_pending_succeeded(provider: OpenAICompatibleProvider, fake: FakeOpenAI) -> None:
    receipt = provider.submit(job(max_cost_micros=2_000))

    upload, create = fake.calls
    assert upload.path == "/v1/files" and upload.form == {"purpose": "batch"}
    assert create.json["input_file_id"] == upload.response["id"]
    assert create.json["endpoint"] == "/v1/chat/completions"
    assert create.json["completion_window"] == "24h"
    assert receipt.batch_id == create.response["id"]
    assert fake.batch(receipt.batch_id)["status"] == "validating"  # type: ignore[index]

    states = []
    for _ in range(5):
        status = provider.poll(receipt.batch_id)
        states.append(status.state)
        if status.state != "pending":
            break
    assert states == ["pending", "succeeded"]

    output_id = fake.batch(receipt.batch_id)["output_file_id"]  # type: ignore[index]
    (download,) = fake.calls_to(f"/v1/files/{output_id}/content")
    assert download.status == 200
    # The input line the fake processed, and the usage it billed.
    input_line = json.loads(fake._files[upload.response["id"]][1])
    assert input_line["custom_id"] == "key-job-1"
    assert input_line["url"] == "/v1/chat/completions"
    assert (
        input_line["body"]["max_tokens"]
        == (2_000 * 1_000_000 - input_token_bound(input_line["body"]["messages"]) * PRICE_IN) // PRICE_OUT
    )
    output_line = json.loads(fake._files[output_id][1])
    assert output_line["custom_id"] == "key-job-1"
    body = output_line["response"]["body"]
    assert status.text == body["choices"][0]["message"]["content"] != ""
    assert status.cost_micros == expected_cost(body["usage"]) > 0
    assert status.cost_micros <= 2_000
    # Polling a finished batch again reads the same result (the runner may repair cost from it).
    again = provider.poll(receipt.batch_id)
    assert (again.state, again.text, again.cost_micros) == ("succeeded", status.text, status.cost_micros)


@pytest.mark.parametrize(
    ("outcome", "state", "reason"),
    [
        ("failed", "failed", "provider_failed"),
        ("cancelled", "failed", "provider_failed"),
        ("expired", "expired", "provider_expired"),
    ],
)
def test_batch_provider_outcomes(
    provider: OpenAICompatibleProvider, fake: FakeOpenAI, outcome: str, state: str, reason: str
) -> None:
    fake.batch_outcome = outcome
    batch_id = provider.submit(job()).batch_id
    assert provider.poll(batch_id).state == "pending"
    status = provider.poll(batch_id)
    assert (status.state, status.reason, status.text, status.cost_micros) == (state, reason, "", 0)


def test_a_completed_batch_whose_requests_all_failed_is_failed(
    provider: OpenAICompatibleProvider, fake: FakeOpenAI
) -> None:
    fake.batch_lines_fail = True
    batch_id = provider.submit(job()).batch_id
    assert provider.poll(batch_id).state == "pending"
    status = provider.poll(batch_id)
    assert fake.batch(batch_id)["status"] == "completed"  # type: ignore[index]
    assert (status.state, status.reason, status.cost_micros) == ("failed", "provider_failed", 0)


def test_a_forgotten_batch_is_gone(provider: OpenAICompatibleProvider, fake: FakeOpenAI) -> None:
    batch_id = provider.submit(job()).batch_id
    fake.forget_batch(batch_id)
    status = provider.poll(batch_id)
    assert status.state == "gone"
    assert status.reason == "provider_gone"


@pytest.mark.parametrize("fault", ["429", "500", "stall"])
def test_poll_failures_raise_and_the_next_poll_recovers(
    fake_server: RunningServer, fake: FakeOpenAI, fault: str
) -> None:
    with OpenAICompatibleProvider(fake_server.url, API_KEY, "m", PRICE_IN, PRICE_OUT, timeout=0.5) as p:
        batch_id = p.submit(job()).batch_id
        if fault == "stall":
            fake.stall_next(seconds=10, path="/v1/batches/")
        else:
            fake.fail_next(status=int(fault), path="/v1/batches/")
        with pytest.raises(ProviderError) as info:
            p.poll(batch_id)
        assert info.value.reason == ("provider_timeout" if fault == "stall" else "provider_error")
        assert p.poll(batch_id).state == "pending"


def test_submit_failures_raise(provider: OpenAICompatibleProvider, fake: FakeOpenAI) -> None:
    fake.fail_next(status=500, path="/v1/batches")
    with pytest.raises(ProviderError) as info:
        provider.submit(job())
    assert info.value.reason == "provider_error"
    assert [c.path for c in fake.calls] == ["/v1/files", "/v1/batches"]  # one attempt each


# ---------------------------------------------------------------------------- secrets


def test_the_api_key_never_leaks(
    fake_server: RunningServer, fake: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    wrong = "sk-wrong-but-still-secret-7f3a"
    caplog.set_level(logging.DEBUG)
    texts: list[str] = []
    for key, arrange in [
        (API_KEY, lambda: fake.fail_next(status=500)),
        (API_KEY, lambda: fake.rate_limit_next()),
        (API_KEY, lambda: fake.stall_next(seconds=10)),
        (wrong, lambda: None),  # the fake's 401 body echoes the key it was given
    ]:
        arrange()
        with OpenAICompatibleProvider(fake_server.url, key, "m", PRICE_IN, PRICE_OUT, timeout=0.5) as p:
            texts += [repr(p), str(p)]
            for call in (lambda: p.run_turn(turn()), lambda: p.submit(job()), lambda: p.poll("batch_x")):
                try:
                    call()
                except ProviderError as exc:
                    texts += [str(exc), repr(exc), repr(exc.args), str(exc.__cause__ or "")]
    assert any(wrong in str(c.response) for c in fake.calls)  # the fake did echo it
    assert any("HTTP 401" in t for t in texts) and any("timed out" in t for t in texts)
    texts += [r.getMessage() for r in caplog.records] + [caplog.text]
    for secret in (API_KEY, wrong):
        assert not [t for t in texts if secret in t]


def test_from_settings(fake_server: RunningServer, fake: FakeOpenAI) -> None:
    settings = Settings(
        openai_base_url=fake_server.url,
        openai_api_key=Secret(API_KEY),
        openai_model="gpt-test",
        openai_timeout=timedelta(seconds=7),
        price_input_per_mtok_micros=PRICE_IN,
        price_output_per_mtok_micros=PRICE_OUT,
    )
    with OpenAICompatibleProvider.from_settings(settings) as p:
        assert p.timeout == 7.0
        assert p.run_turn(turn()).status == "ok"
    assert fake.calls[-1].json["model"] == "gpt-test"
    with pytest.raises(ConfigurationError, match="ALMA_OPENAI_API_KEY"):
        OpenAICompatibleProvider.from_settings(Settings())
