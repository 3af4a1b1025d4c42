"""Fixtures of the adapter tests: the fake OpenAI server and a signing webhook receiver, on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from adapters_support import API_KEY, PRICE_IN, PRICE_OUT, WEBHOOK_SECRET

from alma_schedule.runners.adapters.openai import OpenAICompatibleProvider
from alma_schedule.testing.fake_openai import FakeOpenAI
from alma_schedule.testing.servers import RunningServer, serve_asgi
from alma_schedule.testing.webhook_receiver import WebhookReceiver


@pytest.fixture
def fake() -> FakeOpenAI:
    return FakeOpenAI(api_key=API_KEY)


@pytest.fixture
def fake_server(fake: FakeOpenAI) -> Iterator[RunningServer]:
    with serve_asgi(fake.app) as server:
        yield server


@pytest.fixture
def provider(fake_server: RunningServer) -> Iterator[OpenAICompatibleProvider]:
    with OpenAICompatibleProvider(fake_server.url, API_KEY, "fake-model", PRICE_IN, PRICE_OUT, timeout=10.0) as p:
        yield p


@pytest.fixture
def receiver() -> WebhookReceiver:
    return WebhookReceiver(WEBHOOK_SECRET)


@pytest.fixture
def receiver_server(receiver: WebhookReceiver) -> Iterator[RunningServer]:
    with serve_asgi(receiver.app) as server:
        yield server
