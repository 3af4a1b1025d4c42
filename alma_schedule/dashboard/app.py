"""The dashboard's routes, mounted by ``serve-http`` under ``/dashboard``.

docs/architecture.md, section "The modules, in detail" (dashboard/app.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl

from alma_schedule.dashboard import actions, views, views_fleet, views_runs
from alma_schedule.dashboard.auth import Access
from alma_schedule.dashboard.guard import cross_site, own_origin, store_down
from alma_schedule.dashboard.html import STYLE, STYLE_PATH, esc, layout
from alma_schedule.dashboard.login import Login
from alma_schedule.errors import InvalidInput, StoreError
from alma_schedule.model import Scope

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    from alma_schedule.settings import Settings
    from alma_schedule.stores.base import Store

__all__ = ["dashboard_routes"]

#: The largest form an action accepts, bytes (a reason and a token).
FORM_CAP = 4096


class _NotFound(Exception):
    pass


async def _form(request: Request, cap: int) -> dict[str, str] | None:
    """The url-encoded form of a POST (last value of each name), None above ``cap`` bytes."""
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > cap:
            return None
    try:
        pairs = parse_qsl(body.decode("utf-8"), keep_blank_values=True, max_num_fields=20)
    except (UnicodeDecodeError, ValueError):
        return None
    return dict(pairs)


def dashboard_routes(settings: Settings, get_store: Callable[[], Store], login: Login) -> list[Route]:
    """The routes of the dashboard (settings checked: it is on; ``login.credentials`` set)."""
    from starlette.concurrency import run_in_threadpool
    from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
    from starlette.routing import Route

    credentials = login.credentials
    assert credentials is not None

    access = Access.from_settings(settings)
    schedule_box: dict[str, Any] = {}

    def schedule() -> Any:
        if "s" not in schedule_box:
            schedule_box["s"] = actions.make_schedule(settings, get_store())
        return schedule_box["s"]

    def scope_arg(request: Request, name: str = "scope") -> Scope | None:
        text = (request.query_params.get(name) or "").strip()
        if not text:
            return None
        sc = Scope.parse(text)
        if not access.allows(sc):
            raise _NotFound
        return sc

    def page(title: str, render: Callable[[Request, str], str], *, refresh: int | None = None) -> Callable[..., Any]:
        async def handler(request: Request) -> Response:
            verdict = await login.check(request)
            if verdict.user is None:
                return login.refusal(verdict)
            user = verdict.user
            try:
                body = await run_in_threadpool(render, request, user)
            except StoreError as exc:
                return store_down(request, exc)
            except _NotFound:
                return HTMLResponse(
                    layout(
                        "not found", "<p>no such scope, routine or run here</p>", user=user, read_only=access.read_only
                    ),
                    status_code=404,
                )
            except InvalidInput as exc:
                body = f'<p class="err">{esc(exc)}</p>'
                return HTMLResponse(layout(title, body, user=user, read_only=access.read_only), status_code=400)
            html = layout(title, body, user=user, read_only=access.read_only, refresh=refresh)
            return HTMLResponse(html)

        return handler

    def overview(request: Request, user: str) -> str:
        return views.overview(get_store(), settings, access, settings.now(), scope_arg(request))

    def routines(request: Request, user: str) -> str:
        return views_fleet.routines_page(get_store(), access, scope_arg(request), request.query_params)

    def scopes(request: Request, user: str) -> str:
        return views_fleet.scopes_page(get_store(), settings, access, settings.now(), request.query_params)

    def routine(request: Request, user: str) -> str:
        sc = scope_arg(request)
        rid = request.query_params.get("id") or ""
        r = get_store().get_routine(sc, rid) if sc is not None and rid else None
        if r is None:
            raise _NotFound
        return views_runs.routine_page(get_store(), settings, access, r, settings.now())

    def ledger(request: Request, user: str) -> str:
        return views_fleet.ledger_page(get_store(), access, scope_arg(request), request.query_params)

    def stuck(request: Request, user: str) -> str:
        return views_runs.stuck_page(get_store(), settings, access, settings.now())

    def target(request: Request) -> tuple[str, Scope, str, str | None]:
        action = request.path_params["action"]
        sc = scope_arg(request)
        rid = request.query_params.get("routine") or ""
        run = request.query_params.get("run") or None
        if action not in actions.ACTIONS or sc is None or not rid or (action == "record") != (run is not None):
            raise _NotFound
        if get_store().get_routine(sc, rid) is None:
            raise _NotFound
        return action, sc, rid, run

    def confirm(request: Request, user: str) -> str:
        action, sc, rid, run = target(request)
        if access.read_only:
            return '<p class="err">the dashboard is read-only (ALMA_DASHBOARD_READ_ONLY)</p>'
        key = f"{sc}/{rid}" + (f"/{run}" if run else "")
        advice = actions.advice_for(get_store(), sc, rid, run)
        return actions.confirm_page(
            action, key, str(request.url.path) + "?" + request.url.query, credentials.csrf_token(user), advice
        )

    async def act(request: Request) -> Response:
        own = own_origin(settings.dashboard_origin, request.url.scheme, request.headers.get("host"))
        foreign = cross_site(request.headers, own)
        if foreign is not None:
            return PlainTextResponse(foreign, status_code=403)
        verdict = await login.check(request)
        if verdict.user is None:
            return login.refusal(verdict)
        user = verdict.user
        data = await _form(request, FORM_CAP)
        if data is None:
            return HTMLResponse("the form is too large or not url-encoded", status_code=413)
        if access.read_only:
            return HTMLResponse("the dashboard is read-only (ALMA_DASHBOARD_READ_ONLY)", status_code=403)
        if not credentials.csrf_ok(user, data.get("csrf")):
            return HTMLResponse("missing or wrong CSRF token", status_code=403)

        def run_action(req: Request, who: str) -> str:
            action, sc, rid, run = target(req)
            return actions.perform(schedule(), action, sc, rid, run, data, actor=who)

        done: Response = await page("action", run_action)(request)
        return done

    async def root(request: Request) -> Response:
        return RedirectResponse("/dashboard/", status_code=307)

    async def style(request: Request) -> Response:
        return Response(STYLE, media_type="text/css")

    return [
        Route("/dashboard", root, methods=["GET"]),
        Route(STYLE_PATH, style, methods=["GET"]),
        Route("/dashboard/", page("Overview", overview, refresh=30), methods=["GET"]),
        Route("/dashboard/scopes", page("Scopes", scopes), methods=["GET"]),
        Route("/dashboard/routines", page("Routines", routines), methods=["GET"]),
        Route("/dashboard/routine", page("Routine", routine), methods=["GET"]),
        Route("/dashboard/ledger", page("Ledger", ledger), methods=["GET"]),
        Route("/dashboard/stuck", page("Stuck runs", stuck), methods=["GET"]),
        Route("/dashboard/act/{action}", page("Confirm", confirm), methods=["GET"]),
        Route("/dashboard/act/{action}", act, methods=["POST"]),
    ]
