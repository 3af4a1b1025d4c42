"""A local fake of an OpenAI-compatible API (an ASGI app, starlette), for tests and the demo.
docs/architecture.md, section "The modules, in detail" (testing/fake_openai.py).
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from alma_schedule.testing.fake_openai_faults import CutOff, Fault, FaultControls, error_response
from alma_schedule.testing.fake_openai_wire import count_tokens, default_reply, parse_multipart, prompt_tokens


@dataclass(slots=True)
class Call:
    """One request the fake received (``json`` is the parsed body, ``form`` the multipart fields)."""

    method: str
    path: str
    headers: dict[str, str]
    json: Any = None
    form: dict[str, str] = field(default_factory=dict)
    status: int = 0
    response: Any = None


@dataclass(slots=True)
class _Batch:
    data: dict[str, Any]
    steps: list[str]
    outcome: str


class FakeOpenAI(FaultControls):
    """The fake's state and its ASGI app (:attr:`app`)."""

    def __init__(
        self,
        *,
        api_key: str | None = None,
        reply_words: int = 24,
        reply_fn: Callable[[str, int], str] | None = None,
        batch_steps: tuple[str, ...] = ("in_progress", "completed"),
    ) -> None:
        self.api_key = api_key
        self.reply_words = reply_words
        self.reply_fn = reply_fn
        self.batch_steps = batch_steps
        #: Terminal status of the NEXT batches created: completed, failed, expired or cancelled.
        self.batch_outcome = "completed"
        #: When True, the requests of batches that complete all fail (error file only).
        self.batch_lines_fail = False
        self.calls: list[Call] = []
        #: ``(prompt_tokens, completion_tokens)`` of every completion the fake computed, chat or batch
        #: line, whether or not its answer reached the client: what the provider billed.
        self.billed: list[tuple[int, int]] = []
        self._lock = threading.Lock()
        self._faults: list[Fault] = []
        self._files: dict[str, tuple[str, bytes, str]] = {}  # id -> (filename, content, purpose)
        self._batches: dict[str, _Batch] = {}
        self._seq = itertools.count(1)
        self._ids = itertools.count(1)
        self.app = Starlette(
            routes=[
                Route("/v1/chat/completions", self._chat, methods=["POST"]),
                Route("/v1/files", self._upload, methods=["POST"]),
                Route("/v1/files/{file_id}/content", self._file_content, methods=["GET"]),
                Route("/v1/batches", self._create_batch, methods=["POST"]),
                Route("/v1/batches/{batch_id}", self._get_batch, methods=["GET"]),
            ]
        )

    # ------------------------------------------------------------------ controls

    def forget_batch(self, batch_id: str) -> None:
        """The fake no longer knows ``batch_id``: its ``GET`` answers 404."""
        with self._lock:
            self._batches.pop(batch_id, None)

    def calls_to(self, path: str) -> list[Call]:
        """Recorded calls whose path starts with ``path``."""
        with self._lock:
            return [c for c in self.calls if c.path.startswith(path)]

    def batch(self, batch_id: str) -> dict[str, Any] | None:
        with self._lock:
            b = self._batches.get(batch_id)
            return dict(b.data) if b else None

    # ------------------------------------------------------------------ plumbing

    def _new_id(self, prefix: str) -> str:
        return f"{prefix}{next(self._ids):06d}"

    def _record(self, request: Request, **kw: Any) -> Call:
        headers = {k.lower(): v for k, v in request.headers.items()}
        call = Call(request.method, request.url.path, headers, **kw)
        with self._lock:
            self.calls.append(call)
        return call

    _error = staticmethod(error_response)

    async def _gate(self, request: Request, call: Call) -> Response | None:
        """Authentication and injected faults; a Response ends the request."""
        return await self._admit(request, call, self._take_fault(request.url.path))

    async def _admit(self, request: Request, call: Call, fault: Fault | None) -> Response | None:
        response: Response | None = None
        if fault is not None:
            response = await self._fault_answer(request, fault)
        elif self.api_key is not None:
            auth = request.headers.get("authorization", "")
            if auth != f"Bearer {self.api_key}":
                given = auth.removeprefix("Bearer ")
                response = self._error(
                    401, f"Incorrect API key provided: {given}.", "invalid_request_error", "invalid_api_key"
                )
        if response is not None:
            self._answered(call, response)
        return response

    @staticmethod
    def _answered(call: Call, response: Response) -> None:
        call.status = response.status_code
        body = bytes(response.body) if not isinstance(response, CutOff) else b"null"
        call.response = json.loads(body or b"null")

    def _reply(self, prompt: str) -> str:
        seq = next(self._seq)
        if self.reply_fn is not None:
            return self.reply_fn(prompt, seq)
        return default_reply(prompt, seq, self.reply_words)

    def complete(self, body: dict[str, Any]) -> dict[str, Any]:
        """A chat completion object for a request body (also used for batch lines)."""
        messages = list(body.get("messages") or [])
        last_user: dict[str, Any] = next((m for m in reversed(messages) if m.get("role") == "user"), {})
        words = self._reply(str(last_user.get("content") or "")).split()
        limit = body.get("max_completion_tokens", body.get("max_tokens"))
        finish = "stop"
        if isinstance(limit, int) and count_tokens(" ".join(words)) > limit:
            finish = "length"
            while words and count_tokens(" ".join(words)) > limit:
                words.pop()
        text = " ".join(words)
        usage_in, usage_out = prompt_tokens(messages), count_tokens(text)
        with self._lock:
            self.billed.append((usage_in, usage_out))
        return {
            "id": self._new_id("chatcmpl-"),
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "fake-model"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}],
            "usage": {
                "prompt_tokens": usage_in,
                "completion_tokens": usage_out,
                "total_tokens": usage_in + usage_out,
            },
        }

    # ------------------------------------------------------------------ endpoints

    async def _json_body(self, request: Request) -> Any:
        try:
            return json.loads(await request.body() or b"null")
        except ValueError:
            return None

    async def _chat(self, request: Request) -> Response:
        body = await self._json_body(request)
        call = self._record(request, json=body)
        fault = self._take_fault(request.url.path)
        billed = fault if fault is not None and fault.billed else None
        if (early := await self._admit(request, call, None if billed else fault)) is not None:
            return early
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return self._error(400, "messages is required", "invalid_request_error")
        out = self.complete(body)  # done, and billed
        if billed is not None:  # the answer is lost after the work
            response = await self._fault_answer(request, billed)
            self._answered(call, response)
            return response
        call.status, call.response = 200, out
        return JSONResponse(out)

    async def _upload(self, request: Request) -> Response:
        raw = await request.body()
        form, files = parse_multipart(request.headers.get("content-type", ""), raw)
        call = self._record(request, form=form)
        if (early := await self._gate(request, call)) is not None:
            return early
        if "file" not in files or form.get("purpose") != "batch":
            return self._error(400, "file and purpose=batch are required", "invalid_request_error")
        filename, content = files["file"]
        file_id = self._new_id("file-")
        with self._lock:
            self._files[file_id] = (filename, content, "batch")
        out = {
            "id": file_id,
            "object": "file",
            "bytes": len(content),
            "created_at": int(time.time()),
            "filename": filename,
            "purpose": "batch",
        }
        call.status, call.response = 200, out
        return JSONResponse(out)

    async def _file_content(self, request: Request) -> Response:
        call = self._record(request)
        if (early := await self._gate(request, call)) is not None:
            return early
        with self._lock:
            entry = self._files.get(request.path_params["file_id"])
        if entry is None:
            call.status = 404
            return self._error(404, "No such File object", "invalid_request_error")
        call.status = 200
        return Response(entry[1], media_type="application/octet-stream")

    async def _create_batch(self, request: Request) -> Response:
        body = await self._json_body(request)
        call = self._record(request, json=body)
        if (early := await self._gate(request, call)) is not None:
            return early
        if not isinstance(body, dict) or body.get("input_file_id") not in self._files:
            return self._error(400, "unknown input_file_id", "invalid_request_error")
        if body.get("endpoint") != "/v1/chat/completions" or body.get("completion_window") != "24h":
            return self._error(400, "unsupported endpoint or completion_window", "invalid_request_error")
        now = int(time.time())
        data: dict[str, Any] = {
            "id": self._new_id("batch_"),
            "object": "batch",
            "endpoint": body["endpoint"],
            "errors": None,
            "input_file_id": body["input_file_id"],
            "completion_window": "24h",
            "status": "validating",
            "output_file_id": None,
            "error_file_id": None,
            "created_at": now,
            "expires_at": now + 86_400,
            "completed_at": None,
            "failed_at": None,
            "expired_at": None,
            "cancelled_at": None,
            "request_counts": {"total": 0, "completed": 0, "failed": 0},
            "metadata": body.get("metadata"),
        }
        with self._lock:
            self._batches[data["id"]] = _Batch(data, list(self.batch_steps), self.batch_outcome)
        call.status, call.response = 200, dict(data)
        return JSONResponse(data)

    async def _get_batch(self, request: Request) -> Response:
        call = self._record(request)
        if (early := await self._gate(request, call)) is not None:
            return early
        with self._lock:
            batch = self._batches.get(request.path_params["batch_id"])
        if batch is None:
            call.status = 404
            return self._error(404, "No such Batch object", "invalid_request_error")
        if batch.steps:
            step = batch.steps.pop(0)
            if step == "completed" and batch.outcome != "completed":
                step = batch.outcome
            self._advance(batch, step)
        out = dict(batch.data)
        call.status, call.response = 200, out
        return JSONResponse(out)

    def _advance(self, batch: _Batch, status: str) -> None:
        data, now = batch.data, int(time.time())
        data["status"] = status
        if status == "completed" and self.batch_lines_fail:
            _, content, _ = self._files[data["input_file_id"]]
            lines = [json.loads(line) for line in content.decode().splitlines() if line.strip()]
            error_lines = [
                {
                    "id": self._new_id("batch_req_"),
                    "custom_id": line.get("custom_id"),
                    "response": None,
                    "error": {"code": "model_not_found", "message": "injected"},
                }
                for line in lines
            ]
            error_id = self._new_id("file-")
            blob = "".join(json.dumps(o) + "\n" for o in error_lines).encode()
            with self._lock:
                self._files[error_id] = ("batch_errors.jsonl", blob, "batch_output")
            data.update(
                error_file_id=error_id,
                completed_at=now,
                request_counts={"total": len(lines), "completed": 0, "failed": len(lines)},
            )
        elif status == "completed":
            _, content, _ = self._files[data["input_file_id"]]
            lines = [json.loads(line) for line in content.decode().splitlines() if line.strip()]
            out_lines = [
                {
                    "id": self._new_id("batch_req_"),
                    "custom_id": line.get("custom_id"),
                    "response": {
                        "status_code": 200,
                        "request_id": self._new_id("req_"),
                        "body": self.complete(line.get("body") or {}),
                    },
                    "error": None,
                }
                for line in lines
            ]
            output_id = self._new_id("file-")
            blob = "".join(json.dumps(o) + "\n" for o in out_lines).encode()
            with self._lock:
                self._files[output_id] = ("batch_output.jsonl", blob, "batch_output")
            data.update(
                output_file_id=output_id,
                completed_at=now,
                request_counts={"total": len(lines), "completed": len(lines), "failed": 0},
            )
        elif status == "failed":
            data.update(
                failed_at=now,
                errors={"object": "list", "data": [{"code": "invalid_file", "message": "injected"}]},
            )
        elif status in ("expired", "cancelled"):
            data[f"{status}_at"] = now
