"""Celery-side commands: ``clock send``, ``clock run``, ``serve-http`` and ``worker-check``."""

from __future__ import annotations

import logging
import signal
import threading
from datetime import datetime
from types import FrameType

import click

from alma_schedule.cli.context import CliContext, emit_json, handle_errors, json_option, print_table
from alma_schedule.errors import ConfigurationError, InvalidInput
from alma_schedule.settings import parse_duration


def _instant(text: str | None) -> datetime | None:
    if text is None:
        return None
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidInput(f"--now {text!r} is not an ISO instant") from None
    if value.tzinfo is None:
        raise InvalidInput("--now needs a UTC offset (e.g. 2026-01-01T00:00:00Z)")
    return value


@click.group("clock")
def clock_group() -> None:
    """Send ticks: the clock lives outside the library (cron, a CronJob, this command, HTTP)."""


@clock_group.command("send")
@click.option("--now", "now", default=None, help="ISO instant the tick uses (default: the worker's clock).")
@click.pass_obj
@handle_errors
def clock_send(obj: CliContext, now: str | None) -> None:
    """Send ONE tick message to the tick queue and print its task id (for cron).

    The message expires after ALMA_TICK_EXPIRES, so ticks piled up during an outage are dropped.
    With -A (an app that called install(app)) it goes through that app's broker; else through
    ALMA_BROKER_URL (a production store with memory:// is refused).

    \b
    Examples (crontab, every minute):
      * * * * * cd /srv/fleet && alma-schedule -A fleet clock send
      * * * * * ALMA_BROKER_URL=redis://127.0.0.1:6379/0 alma-schedule clock send
    """
    from alma_schedule.clock import send_tick

    click.echo(send_tick(obj.settings, _instant(now), app=obj.sender_app()))


@clock_group.command("run")
@click.option(
    "--every",
    "every",
    default=None,
    help="Tick on a fixed cadence instead of at the next due instant (90, 30s, 1m, ...): lag up to it.",
)
@click.option(
    "--follow",
    is_flag=True,
    help="Wake at the next due instant (the default; kept as an alias).",
)
@click.pass_obj
@handle_errors
def clock_run(obj: CliContext, every: str | None, follow: bool) -> None:
    """Send ticks until SIGTERM or Ctrl-C: one now, then one at each next due instant.

    By default the clock wakes at the wake-up hint, the earliest instant at which a tick has
    something to do (a fire, a back-off's end, a re-send, an expiry, a poll), read fresh from the
    store at ALMA_DATABASE_URL at every wake-up and at least every ALMA_HINT_POLL (1s); it ticks at
    least once per ALMA_TICK_PERIOD (the heartbeat) and at most once per ALMA_MIN_WAKE_INTERVAL
    for a burst. Each tick names the instant it was woken for and expires after ALMA_TICK_EXPIRES.
    A store it cannot read costs the hint only: it ticks on the heartbeat and says so once.

    With --every D it ticks at every multiple of D instead (no store read; fires start up to D
    late). Run as many clocks as you like: claims make duplicate ticks harmless. With beat, use
    install(app, beat_clock=True) instead.

    \b
    Examples:
      alma-schedule -A fleet clock run
      ALMA_BROKER_URL=redis://127.0.0.1:6379/0 alma-schedule clock run --every 10s
    """
    from alma_schedule.clock import follow_hint, run_clock

    if every is not None and follow:
        raise ConfigurationError("clock run: --every (a fixed cadence) and --follow (the hint) exclude each other")
    hint = None
    if every is None:
        from alma_schedule.waker import store_hint

        store = obj.store()
        store.peek_wake(obj.settings.now())  # an unreachable or unmigrated store is refused now, in one line
        hint = store_hint(obj.settings)
    logging.basicConfig(level=obj.settings.log_level.upper(), format="%(asctime)s %(levelname)s %(message)s")
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    if every is None:
        sent = follow_hint(obj.settings, stop, app=obj.sender_app(), hint=hint)
    else:
        sent = run_clock(obj.settings, parse_duration("--every", every), stop, app=obj.sender_app())
    click.echo(f"clock stopped after {sent} tick(s)", err=True)


@click.command("serve-http")
@click.option("--host", default=None, help="Bind address [env ALMA_HTTP_HOST, default 127.0.0.1].")
@click.option("--port", default=None, type=int, help="Port [env ALMA_HTTP_PORT, default 8080].")
@click.pass_obj
@handle_errors
def serve_http_cmd(obj: CliContext, host: str | None, port: int | None) -> None:
    """Serve POST /tick (enqueue a tick; X-Alma-Secret header) and GET /healthz (heartbeat age).

    Refuses to start without ALMA_HTTP_SECRET, or with one shorter than 16 bytes (UTF-8). POST /tick
    sends through the -A app's broker when it called install(app), else through ALMA_BROKER_URL.
    A malformed body answers 400 with a JSON error. With ALMA_DASHBOARD_SCOPES set, also the
    dashboard (/dashboard/, HTTP Basic with ALMA_DASHBOARD_USER / ALMA_DASHBOARD_PASSWORD_HASH, a
    scrypt hash of at least n=2^14, r=8); with it or ALMA_METRICS_TOKEN, GET /metrics. Repeated wrong
    logins from one client (ALMA_TRUSTED_PROXIES: whose X-Forwarded-For to believe) are refused with
    429; behind a reverse proxy set ALMA_DASHBOARD_ORIGIN. Needs the 'http' extra.

    \b
    Example:
      ALMA_HTTP_SECRET=s3cret-of-24-bytes-long alma-schedule -A proj serve-http --port 8080
      curl -X POST -H 'X-Alma-Secret: s3cret-of-24-bytes-long' http://127.0.0.1:8080/tick
    """
    from alma_schedule.clock import refuse_lost_ticks
    from alma_schedule.http import require_extra, require_secret, serve_http

    require_extra()  # what is not installed first, then its own setting, then the store
    require_secret(obj.settings)
    obj.store_url()  # GET /healthz and the dashboard read the store: refused now when none is configured
    app = obj.sender_app()
    refuse_lost_ticks(obj.settings, app)  # POST /tick sends through the -A app's broker, else ALMA_BROKER_URL
    serve_http(obj.settings, host=host, port=port, app=app)


@click.command("worker-check")
@json_option
@click.pass_obj
@handle_errors
def worker_check(obj: CliContext, as_json: bool) -> None:
    """Check that this configuration can serve every routine kind in the store (what a worker
    serving alma.run checks before it starts); exit 1 naming the missing setting otherwise.

    \b
    Example:
      ALMA_DATABASE_URL=postgresql+psycopg://alma@db/alma alma-schedule worker-check
    """
    from alma_schedule.runners.registry import KindRegistry, stored_kinds

    registry = KindRegistry(obj.settings)
    kinds = registry.check(stored_kinds(obj.store()))
    sources = registry.sources()
    if as_json:
        emit_json({"ok": True, "kinds": kinds, "sources": sources})
        return
    print_table(
        "routine kinds in the store: all served",
        ["kind", "factory"],
        [(k, sources.get(k, "")) for k in kinds] or [("(none)", "")],
    )


def register(group: click.Group) -> None:
    group.add_command(clock_group)
    group.add_command(serve_http_cmd)
    group.add_command(worker_check)
