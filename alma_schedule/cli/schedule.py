"""``alma-schedule schedule next``: preview a schedule's next fires (UTC and zone, DST marked)."""

from __future__ import annotations

import json
from datetime import datetime

import click

from alma_schedule.cli.context import emit_json, handle_errors, json_option, print_table
from alma_schedule.errors import InvalidSchedule


@click.group("schedule")
def schedule_group() -> None:
    """Scheduler calculations (pure: no store needed, but for a schedule's business calendar)."""


@schedule_group.command("next")
@click.argument("schedule")
@click.option("-n", "count", default=5, show_default=True, type=click.IntRange(1, 1000), help="How many fires.")
@click.option("--after", default=None, help="ISO instant to start after (default: now).")
@json_option
@click.pass_obj
@handle_errors
def schedule_next(obj: object, schedule: str, count: int, after: str | None, as_json: bool) -> None:
    """Show the next fires of SCHEDULE (JSON), in UTC and in its zone, DST transitions marked.

    \b
    Example:
      alma-schedule schedule next '{"cron": "30 2 * * *", "tz": "America/New_York"}' -n 5
    """
    from alma_schedule.core import parse_policy, preview_fires, validate_schedule
    from alma_schedule.model.time import system_time

    try:
        value = json.loads(schedule)
    except json.JSONDecodeError as exc:
        raise InvalidSchedule(f"schedule is not JSON: {exc.msg}") from None
    except RecursionError:  # the decoder recurses per level
        raise InvalidSchedule("schedule is nested too deeply to parse") from None
    parsed = validate_schedule(value)
    if getattr(parsed, "calendar", None) is not None:  # a business calendar: read from the store
        from alma_schedule.engine.calendars import check_calendar_of

        check_calendar_of(parsed, obj.store())  # type: ignore[attr-defined]  # the CliContext
    start = _instant(after) if after else system_time().replace(microsecond=0)
    rows = preview_fires(parsed, start, start, count, policy=parse_policy(value))
    if as_json:
        emit_json([{"utc": r.utc, "local": r.local, "zone": r.zone, "note": r.dst_note} for r in rows])
        return
    print_table(
        f"next {len(rows)} fires of {json.dumps(parsed.to_json())}",
        ["#", "UTC", "local", "zone", "note"],
        [(i + 1, r.utc.isoformat(), r.local.isoformat(), r.zone, r.dst_note or "") for i, r in enumerate(rows)],
    )


def _instant(text: str) -> datetime:
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidSchedule(f"--after {text!r} is not an ISO instant") from None
    if value.tzinfo is None:
        raise InvalidSchedule("--after needs a time zone offset")
    return value


def register(group: click.Group) -> None:
    group.add_command(schedule_group)
