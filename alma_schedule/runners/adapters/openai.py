"""An OpenAI-compatible provider over httpx: conversation turns (Chat Completions) and batch jobs (Batch API).

docs/architecture.md, section "The modules, in detail" (runners/adapters/openai.py).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from urllib.parse import quote, urlsplit

from alma_schedule.errors import ConfigurationError, ProviderError, missing_extra
from alma_schedule.runners.governed.money import FRAMING_TOKENS
from alma_schedule.runners.governed.outcome import CONNECT, NOT_SENT, POOL
from alma_schedule.runners.governed.protocols import (
    BatchReceipt,
    BatchRequest,
    BatchStatus,
    TurnReceipt,
    TurnRequest,
)
from alma_schedule.settings import Secret, Settings

try:
    import httpx
except ModuleNotFoundError as exc:  # a bare install: no HTTP client
    raise missing_extra(exc, "openai", "the OpenAI-compatible provider") from None

log = logging.getLogger(__name__)

CHAT_PATH = "/v1/chat/completions"
PENDING = frozenset({"validating", "in_progress", "finalizing", "cancelling"})
_CODE_WORD = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
_MTOK = 1_000_000


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True, slots=True)
class TokenPrices:
    """Prices per million tokens, micro-USD."""

    input_per_mtok_micros: int
    output_per_mtok_micros: int

    def cost_micros(self, prompt_tokens: int, completion_tokens: int) -> int:
        """Integer micro-USD for this usage, rounded up once."""
        raw = prompt_tokens * self.input_per_mtok_micros + completion_tokens * self.output_per_mtok_micros
        return _ceil_div(raw, _MTOK)


def input_token_bound(messages: list[dict[str, str]]) -> int:
    """An upper bound of the prompt tokens of ``messages``: their bytes plus the framing allowance
    (the same bound the governed runners' money plan reserves for)."""
    return FRAMING_TOKENS + sum(len(m.get("content", "").encode("utf-8")) for m in messages)


class OpenAICompatibleProvider:
    """Turns over ``POST /v1/chat/completions``; jobs over ``/v1/files`` + ``/v1/batches``.

    ``base_url`` is the API root with or without ``/v1``. ``timeout`` (seconds) bounds every HTTP
    call. ``client`` may be shared (it is then never closed here); the key is sent per request,
    never installed on the client.
    """

    def __init__(
        self,
        base_url: str,
        api_key: Secret | str,
        model: str,
        price_input_per_mtok_micros: int,
        price_output_per_mtok_micros: int,
        timeout: float | timedelta = 60.0,
        client: httpx.Client | None = None,
        *,
        max_output_tokens: int | None = 16_384,
    ) -> None:
        key = api_key if isinstance(api_key, Secret) else Secret(api_key)
        if not key:
            raise ConfigurationError("the OpenAI-compatible provider needs an API key (ALMA_OPENAI_API_KEY)")
        if price_input_per_mtok_micros < 0 or price_output_per_mtok_micros < 0:
            raise ConfigurationError("provider prices must not be negative")
        root = base_url.rstrip("/")
        self.base_url = root[: -len("/v1")] if root.endswith("/v1") else root
        self._key = key
        self.model = model
        self.prices = TokenPrices(price_input_per_mtok_micros, price_output_per_mtok_micros)
        self.timeout = timeout.total_seconds() if isinstance(timeout, timedelta) else float(timeout)
        self.max_output_tokens = max_output_tokens
        self._own_client = client is None
        self._client = client if client is not None else httpx.Client(timeout=self.timeout)

    @classmethod
    def from_settings(cls, settings: Settings, *, client: httpx.Client | None = None) -> OpenAICompatibleProvider:
        if settings.openai_api_key is None or not settings.openai_api_key:
            raise ConfigurationError("ALMA_OPENAI_API_KEY is required by the OpenAI-compatible provider")
        return cls(
            settings.openai_base_url,
            settings.openai_api_key,
            settings.openai_model,
            settings.price_input_per_mtok_micros,
            settings.price_output_per_mtok_micros,
            settings.openai_timeout,
            client,
            max_output_tokens=settings.openai_max_output_tokens or None,
        )

    def __repr__(self) -> str:
        parts = urlsplit(self.base_url)  # the host only: a base URL may carry user:password@
        where = f"{parts.scheme}://{parts.hostname}" + (f":{parts.port}" if parts.port else "")
        return f"OpenAICompatibleProvider(base_url={where!r}, model={self.model!r}, api_key=********)"

    def close(self) -> None:
        if self._own_client:
            self._client.close()

    def __enter__(self) -> OpenAICompatibleProvider:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ money

    def max_tokens_for(
        self, messages: list[dict[str, str]], max_cost_micros: int, max_output_tokens: int | None
    ) -> int | None:
        """The ``max_tokens`` that keeps any answer within ``max_cost_micros`` (0 = no cost bound).

        None means "send no limit"; 0 means the bound cannot even pay for the input.
        """
        caps = [c for c in (max_output_tokens, self.max_output_tokens) if c is not None]
        if max_cost_micros > 0:
            room = max_cost_micros * _MTOK - input_token_bound(messages) * self.prices.input_per_mtok_micros
            if room < 0:
                return 0
            if self.prices.output_per_mtok_micros > 0:
                caps.append(room // self.prices.output_per_mtok_micros)
        return max(0, min(caps)) if caps else None

    def _body(self, prompt: str, model: str | None, max_tokens: int | None) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": model or self.model,
            "messages": [{"role": "user", "content": prompt}],
        }
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        return body

    def _answer(self, completion: Any, max_tokens: int | None, prompt: str) -> tuple[str, int, str | None]:
        """(text, cost, completion id) of a chat completion object."""
        text = _text_of(completion)
        usage = completion.get("usage")
        try:
            cost = self.prices.cost_micros(int(usage["prompt_tokens"]), int(usage["completion_tokens"]))
        except (KeyError, TypeError, ValueError):
            # No usable usage: charge an upper bound rather than nothing.
            log.warning("provider answer without usage; charging the request's upper bound")
            bound_in = input_token_bound([{"content": prompt}])
            bound_out = max_tokens if max_tokens is not None else len(text.encode("utf-8"))
            cost = self.prices.cost_micros(bound_in, bound_out)
        ident = completion.get("id")
        return text, cost, ident if isinstance(ident, str) else None

    # ------------------------------------------------------------------ HTTP

    def _send(self, method: str, path: str, what: str, *, ok_404: bool = False, **kw: Any) -> httpx.Response:
        headers = {"Authorization": f"Bearer {self._key.reveal()}", **kw.pop("headers", {})}
        try:
            response = self._client.request(method, self.base_url + path, headers=headers, timeout=self.timeout, **kw)
        except httpx.TimeoutException as exc:
            log.warning("provider %s timed out after %gs", what, self.timeout)
            message = f"{what} timed out after {self.timeout:g}s"
            raise ProviderError(message, reason="provider_timeout", phase=_phase(exc)) from exc
        except httpx.HTTPError as exc:
            log.warning("provider %s failed: %s", what, type(exc).__name__)
            raise ProviderError(f"{what} failed: {type(exc).__name__}", phase=_phase(exc)) from None
        status = response.status_code
        if 200 <= status < 300 or (ok_404 and status == 404):
            return response
        code = _error_code(response)
        log.warning("provider %s answered HTTP %d%s", what, status, f" ({code})" if code else "")
        raise ProviderError(f"{what} answered HTTP {status}" + (f" ({code})" if code else ""), status_code=status)

    @staticmethod
    def _json(response: httpx.Response, what: str) -> Any:
        try:
            return response.json()
        except ValueError:
            raise ProviderError(f"{what}: the answer is not JSON") from None

    # ------------------------------------------------------------------ conversation

    def run_turn(self, request: TurnRequest) -> TurnReceipt:
        """One chat completion. Raises ProviderError on timeouts, 429, 5xx and other HTTP errors."""
        body = self._body(request.prompt, request.model, None)
        max_tokens = self.max_tokens_for(body["messages"], request.max_cost_micros, request.max_output_tokens)
        if max_tokens == 0:
            return TurnReceipt("not_admitted", reason="bound_below_input")
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        extra = {"X-Client-Request-Id": request.custom_id} if request.custom_id else {}
        response = self._send("POST", CHAT_PATH, "chat completion", json=body, headers=extra)
        completion = self._json(response, "chat completion")
        text, cost, turn_id = self._answer(completion, max_tokens, request.prompt)
        return TurnReceipt("ok", text=text, cost_micros=cost, turn_id=turn_id)

    # ------------------------------------------------------------------ batch

    def submit(self, request: BatchRequest) -> BatchReceipt:
        """Upload a one-line JSONL input file, then create the batch (endpoint chat completions, 24h).

        Not idempotent by itself: the runner submits once. A bound that cannot pay for the input
        raises ProviderError ``not_admitted`` before any call.
        """
        body = self._body(request.prompt, request.model, None)
        max_tokens = self.max_tokens_for(body["messages"], request.max_cost_micros, request.max_output_tokens)
        if max_tokens == 0:
            raise ProviderError("the cost bound cannot pay for the input", reason="not_admitted", phase=NOT_SENT)
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        line = {"custom_id": request.custom_id, "method": "POST", "url": CHAT_PATH, "body": body}
        blob = (json.dumps(line, ensure_ascii=False) + "\n").encode("utf-8")
        try:
            uploaded = self._json(
                self._send(
                    "POST",
                    "/v1/files",
                    "batch input upload",
                    files={"file": (f"{request.custom_id or 'alma'}.jsonl", blob, "application/jsonl")},
                    data={"purpose": "batch"},
                ),
                "batch input upload",
            )
        except ProviderError as exc:  # an input file bills nothing: the batch was never created
            exc.phase, exc.status_code = NOT_SENT, None
            raise
        file_id = uploaded.get("id") if isinstance(uploaded, Mapping) else None
        if not isinstance(file_id, str):
            raise ProviderError("batch input upload: no file id in the answer", phase=NOT_SENT)
        created = self._json(
            self._send(
                "POST",
                "/v1/batches",
                "batch creation",
                json={
                    "input_file_id": file_id,
                    "endpoint": CHAT_PATH,
                    "completion_window": "24h",
                    "metadata": {"alma_key": request.custom_id[:512]},
                },
            ),
            "batch creation",
        )
        batch_id = created.get("id") if isinstance(created, Mapping) else None
        if not isinstance(batch_id, str):
            raise ProviderError("batch creation: no batch id in the answer")
        return BatchReceipt(batch_id)

    def poll(self, batch_id: str) -> BatchStatus:
        """Read the batch: pending, succeeded (text, cost), failed, expired, or gone (HTTP 404)."""
        path = f"/v1/batches/{quote(batch_id, safe='')}"
        response = self._send("GET", path, "batch poll", ok_404=True)
        if response.status_code == 404:
            return BatchStatus("gone", reason="provider_gone")
        batch = self._json(response, "batch poll")
        status = batch.get("status") if isinstance(batch, Mapping) else None
        if status in PENDING:
            return BatchStatus("pending")
        if status not in ("completed", "failed", "cancelled", "expired"):
            log.warning("batch poll: unknown batch status %r; treated as pending", str(status)[:32])
            return BatchStatus("pending")
        text, cost, succeeded = "", 0, False
        output_id = batch.get("output_file_id")
        if isinstance(output_id, str) and output_id:
            text, cost, succeeded = self._read_output(output_id)
        if status == "completed" and succeeded:
            return BatchStatus("succeeded", text=text, cost_micros=cost)
        if status == "expired":
            return BatchStatus("expired", cost_micros=cost, reason="provider_expired")
        return BatchStatus("failed", cost_micros=cost, reason="provider_failed")

    def _read_output(self, file_id: str) -> tuple[str, int, bool]:
        """(text of the successful lines, cost of every line with usage, any line succeeded)."""
        what = "batch output download"
        response = self._send("GET", f"/v1/files/{quote(file_id, safe='')}/content", what)
        texts: list[str] = []
        cost = 0
        for raw in response.text.splitlines():
            if not raw.strip():
                continue
            try:
                line = json.loads(raw)
                reply = line.get("response") or {}
                body = reply.get("body") or {}
            except (ValueError, AttributeError):
                raise ProviderError(f"{what}: an output line is not JSON") from None
            if not isinstance(body, Mapping):
                continue
            if isinstance(body.get("usage"), Mapping):
                usage = body["usage"]
                try:
                    tokens_in, tokens_out = int(usage["prompt_tokens"]), int(usage["completion_tokens"])
                    cost += self.prices.cost_micros(tokens_in, tokens_out)
                except (KeyError, TypeError, ValueError):
                    raise ProviderError(f"{what}: unreadable usage") from None
            if reply.get("status_code") == 200 and line.get("error") is None and body.get("choices"):
                texts.append(_text_of(body))
        return "\n".join(texts), cost, bool(texts)


def _text_of(completion: Any) -> str:
    """The assistant text of a chat completion object (ProviderError when there is none)."""
    try:
        content = completion["choices"][0]["message"].get("content") or ""
    except (KeyError, IndexError, TypeError, AttributeError):
        raise ProviderError("the provider's answer has no message") from None
    return content if isinstance(content, str) else ""


def _phase(exc: httpx.HTTPError) -> str | None:
    """Where a transport error struck before any answer: ``connect`` (the connection was never
    made: refused, DNS, TLS), ``pool`` (no pooled connection in time), else None (the request may
    have left: a reset, a read or write error or timeout)."""
    if isinstance(exc, httpx.ConnectError):
        return CONNECT
    if isinstance(exc, httpx.PoolTimeout):
        return POOL
    return None


def _error_code(response: httpx.Response) -> str | None:
    """The API's error code word (``rate_limit_exceeded``), never its free-text message."""
    try:
        error = response.json().get("error")
        code = error.get("code") or error.get("type")
    except (ValueError, AttributeError):
        return None
    return code if isinstance(code, str) and _CODE_WORD.match(code) else None
