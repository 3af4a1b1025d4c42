"""The fake provider and the webhook receiver of the chaos suite, with the instant of each request
(the package's fakes record what they received, not when: the suite needs both to see whether two
runs of one routine overlapped). They run in the suite's own process, outside the chaos."""

from __future__ import annotations

import json
import time
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from alma_schedule.testing.fake_openai import Call, FakeOpenAI
from alma_schedule.testing.webhook_receiver import WebhookReceiver

WEBHOOK_SECRET = "chaos-webhook-secret-0123456789"
API_KEY = "chaos-provider-key"


class TimedProvider(FakeOpenAI):
    def __init__(self) -> None:
        super().__init__(api_key=API_KEY)
        self.stamped: list[tuple[float, Call]] = []

    def _record(self, request: Request, **kw: Any) -> Call:
        call = super()._record(request, **kw)
        self.stamped.append((time.time(), call))
        return call

    def model_calls(self) -> list[tuple[float, str, str, Any]]:
        """``(at, "chat" | "batch", governed key, usage or None)`` of each turn and batch created."""
        with self._lock:
            stamped = list(self.stamped)
        out: list[tuple[float, str, str, Any]] = []
        for at, call in stamped:
            if call.path.endswith("/chat/completions"):
                usage = call.response.get("usage") if call.status == 200 and call.response else None
                out.append((at, "chat", call.headers.get("x-client-request-id", "?"), usage))
            elif call.path.endswith("/batches") and call.method == "POST":
                key = ((call.json or {}).get("metadata") or {}).get("alma_key", "?")
                out.append((at, "batch", str(key), None))
        return out

    def billed_lines(self) -> list[tuple[str, Any]]:
        """``(governed key, usage)`` of every request of every completed batch (billed when it completed)."""
        with self._lock:
            files = list(self._files.values())
        out: list[tuple[str, Any]] = []
        for name, content, _ in files:
            if name != "batch_output.jsonl":
                continue
            for line in content.decode().splitlines():
                item = json.loads(line)
                out.append((str(item.get("custom_id")), item["response"]["body"]["usage"]))
        return out


class TimedReceiver(WebhookReceiver):
    def __init__(self) -> None:
        super().__init__(WEBHOOK_SECRET)
        self.stamps: list[float] = []

    async def _hook(self, request: Request) -> Response:
        arrived = time.time()
        response = await super()._hook(request)
        with self._lock:  # nothing awaited since the append: the last one received is this one
            self.stamps.append(arrived)
        return response

    def attempts(self) -> list[tuple[float, str]]:
        """``(at, idempotency key)`` of every delivery attempt received."""
        with self._lock:
            return [(at, r.idempotency_key or "?") for at, r in zip(self.stamps, self.received, strict=False)]
