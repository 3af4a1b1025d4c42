"""``alma-schedule serve-http``: a tiny ASGI clock endpoint and the clock's own alarm.

docs/architecture.md, section "The modules, in detail" (http.py).
"""

from __future__ import annotations

import contextlib
import functools
import hmac
import json
import logging
import threading
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from alma_schedule.errors import AlmaScheduleError, ConfigurationError, DispatchError, InvalidInput, missing_extra
from alma_schedule.http_limits import REQUEST_DEADLINE, RequestDeadline, uvicorn_options
from alma_schedule.run_queue_watch import unconsumed

if TYPE_CHECKING:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response

    from alma_schedule.settings import Secret, Settings
    from alma_schedule.stores.base import Store

log = logging.getLogger(__name__)

SECRET_HEADER = "X-Alma-Secret"

Sender = Callable[["Settings", "datetime | None"], str]


class _Body(Exception):
    """The request body exceeds the cap."""


#: The shortest ``ALMA_HTTP_SECRET`` serve-http starts with, in UTF-8 bytes.
MIN_SECRET_BYTES = 16


def require_secret(settings: Settings) -> None:
    """Refuse, in one line naming ALMA_HTTP_SECRET, a missing secret or one under 16 bytes (UTF-8)."""
    if settings.http_secret is None or not settings.http_secret:
        raise ConfigurationError("serve-http needs ALMA_HTTP_SECRET (the X-Alma-Secret header value)")
    size = len(settings.http_secret.reveal().encode("utf-8", "surrogatepass"))
    if size < MIN_SECRET_BYTES:
        raise ConfigurationError(
            f"ALMA_HTTP_SECRET is {size} bytes: serve-http needs at least {MIN_SECRET_BYTES} (UTF-8), "
            "e.g. `python -c 'import secrets; print(secrets.token_urlsafe(24))'`"
        )


def secret_matches(secret: Secret, header: str) -> bool:
    """Whether the ``X-Alma-Secret`` header (as Starlette gives it: its bytes decoded as latin-1) is
    ``secret``'s UTF-8 bytes, compared in constant time (a non-ASCII secret sent as UTF-8 matches)."""
    try:
        raw = header.encode("latin-1")
    except UnicodeEncodeError:  # not what Starlette hands over; never a match
        return False
    return hmac.compare_digest(raw, secret.reveal().encode("utf-8", "surrogatepass"))


def _shown(text: str, limit: int = 200) -> str:
    """``text`` safe for a JSON answer (no lone surrogate, bounded)."""
    safe = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return safe if len(safe) <= limit else f"{safe[: limit - 3]}..."


async def _read_capped(request: Request, cap: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.strip().isdigit() and int(declared) > cap:
        raise _Body
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > cap:
            raise _Body
    return bytes(body)


def _next_wake(get_store: Callable[[], Store]) -> str | None:
    """The wake-up hint the last tick stored (advisory; None when the store cannot say)."""
    try:
        wake = get_store().next_wake_at()
    except AlmaScheduleError as exc:  # the tick is sent: a store that cannot answer costs the hint only
        log.warning("POST /tick: no wake-up hint (%s)", type(exc).__name__)
        return None
    return None if wake is None else wake.isoformat()


def _parse_now(body: bytes) -> datetime | None:
    if not body.strip():
        return None
    try:
        value = json.loads(body)
    except (ValueError, RecursionError):  # not UTF-8, not JSON, too deeply nested, too long a number
        raise InvalidInput('the body must be JSON: {} or {"now": "<ISO instant>"}') from None
    if not isinstance(value, dict) or set(value) - {"now"}:
        raise InvalidInput('the body may only hold {"now": "<ISO instant>"}')
    raw = value.get("now")
    if raw is None:
        return None
    if not isinstance(raw, str):
        raise InvalidInput("now must be an ISO-8601 string")
    shown = _shown(repr(raw), 80)
    try:
        now = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidInput(f"now {shown} is not an ISO-8601 instant") from None
    if now.tzinfo is None:
        raise InvalidInput(f"now {shown} has no UTC offset")
    try:
        return now.astimezone(UTC)
    except OverflowError:
        raise InvalidInput(f"now {shown} is out of range") from None


def create_http_app(
    settings: Settings,
    *,
    store: Store | None = None,
    send: Sender | None = None,
    deadline: float = REQUEST_DEADLINE,
) -> Starlette:
    """The ASGI app. ``store`` defaults to ``open_store(settings.database_url)`` (opened on first
    ``/healthz``, closed at shutdown); ``send`` defaults to :func:`~alma_schedule.clock.send_tick`;
    ``deadline``: seconds each request has (:class:`~alma_schedule.http_limits.RequestDeadline`)."""
    try:
        from starlette.applications import Starlette
        from starlette.concurrency import run_in_threadpool
        from starlette.middleware import Middleware
        from starlette.responses import JSONResponse
        from starlette.routing import Route
    except ModuleNotFoundError as exc:
        raise missing_extra(exc, "http", "serve-http") from None
    from alma_schedule.dashboard.guard import SecurityHeaders

    require_secret(settings)
    secret = settings.http_secret
    assert secret is not None
    if send is None:
        from alma_schedule.clock import send_tick

        send = send_tick
    sender: Sender = send
    lock = threading.Lock()
    opened: dict[str, Any] = {"store": store, "own": store is None}

    def get_store() -> Store:
        with lock:
            if opened["store"] is None:
                from alma_schedule.stores import open_store

                opened["store"] = open_store(settings.database_url, schema=settings.database_schema)
            return opened["store"]  # type: ignore[no-any-return]

    async def tick(request: Request) -> Response:
        given = request.headers.get(SECRET_HEADER)
        if given is None or not secret_matches(secret, given):
            return JSONResponse({"error": "unauthorized"}, status_code=401)
        try:
            body = await _read_capped(request, settings.http_max_body)
        except _Body:
            too_big = f"body larger than {settings.http_max_body} bytes"
            return JSONResponse({"error": too_big}, status_code=413)
        try:
            now = _parse_now(body)
            task_id = await run_in_threadpool(sender, settings, now)
        except InvalidInput as exc:
            return JSONResponse({"error": _shown(str(exc))}, status_code=400)
        except DispatchError as exc:
            log.warning("POST /tick: %s", exc)
            return JSONResponse({"error": "the broker did not take the tick"}, status_code=503)
        wake = await run_in_threadpool(_next_wake, get_store)
        return JSONResponse({"task_id": task_id, "next_wake_at": wake}, status_code=202)

    async def healthz(request: Request) -> Response:
        now = settings.time_source()
        try:
            last = await run_in_threadpool(lambda: get_store().last_tick())
            idle = await run_in_threadpool(lambda: unconsumed(get_store(), now, settings, detail=False))
        except AlmaScheduleError as exc:
            log.warning("GET /healthz: %s", type(exc).__name__)
            return JSONResponse({"ok": False, "error": "store unavailable"}, status_code=503)
        if last is None:
            return JSONResponse({"ok": False, "status": "stale", "age_seconds": None}, status_code=503)
        age = (now - last).total_seconds()
        ok = age <= settings.heartbeat_max_age.total_seconds()
        payload: dict[str, Any] = {"ok": ok, "status": "ok" if ok else "stale", "age_seconds": round(age, 3)}
        if idle is not None:
            payload["run_queue"] = idle  # said, not failed: the ticks run; restarting this process fixes nothing
        return JSONResponse(payload, status_code=200 if ok else 503)

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            with lock:
                if opened["own"] and opened["store"] is not None:
                    opened["store"].close()
                    opened["store"] = None

    routes = [Route("/tick", tick, methods=["POST"]), Route("/healthz", healthz, methods=["GET"])]
    routes += _dashboard_routes(settings, get_store)
    middleware = [Middleware(SecurityHeaders), Middleware(RequestDeadline, seconds=deadline)]
    return Starlette(routes=routes, lifespan=lifespan, middleware=middleware)


def _dashboard_routes(settings: Settings, get_store: Callable[[], Store]) -> list[Any]:
    """The dashboard once ALMA_DASHBOARD_SCOPES is set, and GET /metrics once the dashboard
    or ALMA_METRICS_TOKEN is; else nothing is mounted. Both share one :class:`Login` (its throttle)."""
    routes: list[Any] = []
    credentials = None
    if settings.dashboard_scopes is not None:
        from alma_schedule.dashboard.auth import Credentials

        if not settings.dashboard_user or settings.dashboard_password_hash is None:
            raise ConfigurationError("the dashboard needs ALMA_DASHBOARD_USER and ALMA_DASHBOARD_PASSWORD_HASH")
        credentials = Credentials(settings.dashboard_user, settings.dashboard_password_hash.reveal())
    if credentials is None and not settings.metrics_token:
        return routes
    from alma_schedule.dashboard.login import Login
    from alma_schedule.dashboard.metrics import metrics_route

    login = Login(settings, credentials)
    if credentials is not None:
        from alma_schedule.dashboard.app import dashboard_routes

        routes += dashboard_routes(settings, get_store, login)
    routes.append(metrics_route(settings, get_store, login))
    return routes


def _send_through(app: Any, settings: Settings, now: datetime | None) -> str:
    from alma_schedule.clock import send_tick

    return send_tick(settings, now, app=app)


def serve_http(settings: Settings, *, host: str | None = None, port: int | None = None, app: Any = None) -> None:
    """Run the app under uvicorn until interrupted (refuses to start without a secret), with the
    limits of :func:`~alma_schedule.http_limits.uvicorn_options`; ticks go through ``app`` (a
    fleet's app that called ``install(app)``) when given, else through ``ALMA_BROKER_URL``."""
    require_extra()
    import uvicorn

    send = None if app is None else functools.partial(_send_through, app)
    asgi = create_http_app(settings, send=send)
    options = uvicorn_options(
        host=host or settings.http_host,
        port=port if port is not None else settings.http_port,
        log_level=settings.log_level.lower(),
    )
    uvicorn.run(asgi, **options)


def require_extra() -> None:
    """Refuse (one line naming the extra) when the ``http`` extra (uvicorn, starlette) is not installed."""
    try:
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ModuleNotFoundError as exc:
        raise missing_extra(exc, "http", "serve-http") from None
