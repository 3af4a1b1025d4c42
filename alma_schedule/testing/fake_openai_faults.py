"""The injected faults of :class:`~alma_schedule.testing.fake_openai.FakeOpenAI`: what the next requests
answer instead of the real thing, and whether the fake BILLED them first.
docs/architecture.md, section "The modules, in detail" (testing/fake_openai_faults.py).
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

__all__ = ["CutOff", "Fault", "FaultControls", "error_response"]


@dataclass(slots=True)
class Fault:
    kind: str  # "status" | "stall" | "reset"
    status: int
    seconds: float
    path: str | None
    remaining: int
    billed: bool = False


def error_response(status: int, message: str, type_: str, code: str | None = None) -> JSONResponse:
    """An OpenAI-shaped error answer."""
    headers = {"retry-after": "1"} if status == 429 else None
    body = {"error": {"message": message, "type": type_, "param": None, "code": code}}
    return JSONResponse(body, status_code=status, headers=headers)


class CutOff(Response):
    """Start a 200 answer, send part of its body, and return: the server closes the connection
    mid-answer (uvicorn: "ASGI callable returned without completing response"), which the client
    sees as the peer dropping it."""

    def __init__(self) -> None:
        super().__init__(status_code=200)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        headers = [(b"content-type", b"application/json"), (b"content-length", b"4096")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b'{"id": "chatcmpl-', "more_body": True})


class FaultControls:
    """The controls (thread-safe: the app runs on uvicorn's thread) and the answer of a taken fault."""

    _lock: threading.Lock
    _faults: list[Fault]
    _released: int = 0

    def fail_next(self, times: int = 1, *, status: int = 500, path: str | None = None, billed: bool = False) -> None:
        """The next ``times`` requests (to ``path`` if given) answer ``status`` with an error body
        (``billed``: after the work was done and billed)."""
        with self._lock:
            self._faults.append(Fault("status", status, 0.0, path, times, billed))

    def rate_limit_next(self, times: int = 1, *, path: str | None = None) -> None:
        """The next ``times`` requests answer 429 (``Retry-After: 1``)."""
        self.fail_next(times, status=429, path=path)

    def stall_next(
        self, times: int = 1, *, seconds: float = 5.0, path: str | None = None, billed: bool = False
    ) -> None:
        """The next ``times`` requests hang until the client disconnects (at most ``seconds``)
        (``billed``: after the work was done and billed)."""
        with self._lock:
            self._faults.append(Fault("stall", 0, seconds, path, times, billed))

    def reset_next(self, times: int = 1, *, path: str | None = None, billed: bool = True) -> None:
        """The next ``times`` requests get the start of an answer, then the connection is dropped
        (by default after the work was done and billed)."""
        with self._lock:
            self._faults.append(Fault("reset", 0, 0.0, path, times, billed))

    def _take_fault(self, path: str) -> Fault | None:
        with self._lock:
            for f in self._faults:
                if f.path is None or path.startswith(f.path):
                    f.remaining -= 1
                    if f.remaining <= 0:
                        self._faults.remove(f)
                    return f
        return None

    def release_stalls(self) -> None:
        """End every stall now (each answers its 504); later stalls hold again."""
        with self._lock:
            self._released += 1

    async def _fault_answer(self, request: Request, fault: Fault) -> Response:
        """What a taken fault answers."""
        if fault.kind == "reset":
            return CutOff()
        if fault.kind == "stall":
            deadline = time.monotonic() + fault.seconds
            released = self._released
            while time.monotonic() < deadline and self._released == released and not await request.is_disconnected():
                await asyncio.sleep(0.02)
            return error_response(504, "stalled by the fake", "server_error")
        kind = "requests" if fault.status == 429 else "server_error"
        code = "rate_limit_exceeded" if fault.status == 429 else None
        return error_response(fault.status, f"injected {fault.status}", kind, code)
