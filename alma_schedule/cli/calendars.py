"""``alma-schedule calendars add | list | show | refresh | delete``: business calendars, SYSTEM data
(named once for the installation; routines of any scope refer to them by name)."""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

import click

from alma_schedule.cli.context import CliContext, emit_json, fail, handle_errors, json_option, print_table
from alma_schedule.engine.calendars import install_from, parse_weekend, resolve_calendar, running_out
from alma_schedule.engine.register import rederived_due
from alma_schedule.model import Routine, aware_utc
from alma_schedule.model.calendar import MAX_YEARS, Calendar
from alma_schedule.stores.calendars import calendar_name

SHOWN = 10


def _now(obj: CliContext) -> Any:
    return aware_utc("the time source's instant", obj.settings.time_source())


def _rederive(obj: CliContext, name: str) -> int:
    """After a change: the next fires of the routines that use ``name`` derived again (``reindex``)."""
    store = obj.store()
    if not store.calendar_users(name, limit=1):
        return 0
    install_from(store)

    def derive(routine: Routine) -> datetime | None:  # only the routines that name it move
        return rederived_due(routine) if routine.schedule.get("calendar") == name else routine.next_due_at

    return int(store.reindex(derive))


def _row(c: Calendar) -> tuple[Any, ...]:
    where = "/".join(p for p in (c.country, c.subdiv, c.market) if p)
    return (c.name, where, c.weekend_names or "(none)", f"{c.first_year}-{c.last_year}", len(c.holidays), c.version)


@click.group("calendars")
def calendars() -> None:
    """Business calendars: named holiday sets routines roll their cron fires off. System operations.

    \b
    A schedule names one: {"cron": "0 9 L * *", "tz": "America/New_York", "calendar": "us", "roll": "preceding"}
    (roll: skip, following or preceding; L in the day-of-month field is the month's last day).
    """


@calendars.command("add")
@click.argument("name")
@click.option("--country", required=True, help="ISO country code the holidays package knows (e.g. US).")
@click.option("--subdiv", default=None, help="A subdivision of the country (e.g. NY).")
@click.option("--market", default=None, help="A financial market (e.g. NYSE): its closing days replace the country's.")
@click.option("--weekend", default="sat,sun", show_default=True, help="The closed weekdays, comma-separated.")
@click.option("--add", "added", multiple=True, metavar="YYYY-MM-DD", help="A date closed besides the holidays.")
@click.option("--remove", "removed", multiple=True, metavar="YYYY-MM-DD", help="A holiday kept open.")
@click.option("--years", default=5, show_default=True, type=click.IntRange(1, MAX_YEARS), help="Years resolved.")
@json_option
@click.pass_obj
@handle_errors
def add(obj: CliContext, name: str, country: str, subdiv: str | None, market: str | None, weekend: str,
        added: tuple[str, ...], removed: tuple[str, ...], years: int, as_json: bool) -> None:  # fmt: skip
    """Store calendar NAME, its holidays resolved for YEARS years from this one. System operation.

    \b
    Example:
      alma-schedule calendars add us-ny --country US --subdiv NY --add 2026-12-24
    """
    now = _now(obj)
    cal = resolve_calendar(
        calendar_name(name), country=country, subdiv=subdiv, market=market, weekend=parse_weekend(weekend),
        add=added, remove=removed, years=years, first_year=now.year,
    )  # fmt: skip
    if obj.store().get_calendar(cal.name) is not None:
        fail(f"'name': calendar {cal.name!r} exists; change it with `calendars refresh` or delete it first")
    stored = obj.store().put_calendar(cal, now=now, expected_version=0)
    if as_json:
        emit_json(stored.to_dict())
        return
    click.echo(
        f"calendar {stored.name} v{stored.version}: {len(stored.holidays)} holidays, "
        f"{stored.first_year}-{stored.last_year}"
    )


@calendars.command("list")
@json_option
@click.pass_obj
@handle_errors
def list_(obj: CliContext, as_json: bool) -> None:
    """Every calendar. System operation."""
    rows = obj.store().list_calendars()
    if as_json:
        emit_json([c.to_dict() for c in rows])
        return
    if not rows:
        click.echo("no calendars")
        return
    print_table(None, ["name", "holidays of", "weekend", "years", "holidays", "version"], [_row(c) for c in rows])
    for warning in running_out(rows, _now(obj)):
        click.echo(f"warning: {warning}")


@calendars.command("show")
@click.argument("name")
@json_option
@click.pass_obj
@handle_errors
def show(obj: CliContext, name: str, as_json: bool) -> None:
    """Calendar NAME, its next holidays and the routines that use it. System operation."""
    store = obj.store()
    cal = store.get_calendar(calendar_name(name))
    if cal is None:
        names = [c.name for c in store.list_calendars()]
        from alma_schedule.core.calendar import suggest

        fail(f"'name': no calendar {name!r}{suggest(name, names)}")
        return
    today = _now(obj).date().isoformat()
    upcoming = [(d, n) for d, n in cal.holidays if d >= today][:SHOWN]
    users = ["/".join(k) for k in store.calendar_users(cal.name, limit=SHOWN)]
    if as_json:
        emit_json({**cal.to_dict(), "next_holidays": [list(p) for p in upcoming], "routines": users})
        return
    print_table(None, ["name", "holidays of", "weekend", "years", "holidays", "version"], [_row(c) for c in [cal]])
    print_table(
        "next holidays",
        ["date", "weekday", "holiday"],
        [(d, date.fromisoformat(d).strftime("%a"), n) for d, n in upcoming],
    )
    click.echo(f"used by: {', '.join(users) if users else 'no routine'}")


@calendars.command("refresh")
@click.argument("name")
@click.option("--years", default=5, show_default=True, type=click.IntRange(1, MAX_YEARS), help="Years from this one.")
@click.option("--add", "added", multiple=True, metavar="YYYY-MM-DD", help="A date to close besides the holidays.")
@click.option("--remove", "removed", multiple=True, metavar="YYYY-MM-DD", help="A date to keep open.")
@json_option
@click.pass_obj
@handle_errors
def refresh(
    obj: CliContext, name: str, years: int, added: tuple[str, ...], removed: tuple[str, ...], as_json: bool
) -> None:
    """Resolve calendar NAME again, through YEARS years from this one, with the dates added or
    removed (a new version), and re-derive the next fires of the routines that use it. System operation.

    \b
    Example:
      alma-schedule calendars refresh us-ny --years 5 --add 2027-01-09
    """
    store, now = obj.store(), _now(obj)
    old = store.get_calendar(calendar_name(name))
    if old is None:
        fail(f"'name': no calendar {name!r}")
        return
    last = max(old.last_year, now.year + years - 1)
    first = max(old.first_year, last - MAX_YEARS + 1)
    cal = resolve_calendar(
        old.name, country=old.country, subdiv=old.subdiv, market=old.market, weekend=old.weekend,
        add=sorted({*old.added, *added} - set(removed)), remove=sorted({*old.removed, *removed} - set(added)),
        years=last - first + 1, first_year=first,
    )  # fmt: skip
    stored = store.put_calendar(cal, now=now, expected_version=old.version)
    changed = _rederive(obj, stored.name)
    if as_json:
        emit_json({**stored.to_dict(), "routines_rederived": changed})
        return
    click.echo(
        f"calendar {stored.name} v{stored.version}: {stored.first_year}-{stored.last_year}; "
        f"{changed} routine(s) re-derived"
    )


@calendars.command("delete")
@click.argument("name")
@click.pass_obj
@handle_errors
def delete(obj: CliContext, name: str) -> None:
    """Delete calendar NAME; refused while a routine's schedule names it. System operation."""
    if not obj.store().delete_calendar(calendar_name(name)):
        fail(f"'name': no calendar {name!r}")
    click.echo(f"deleted calendar {name}")


def register(group: click.Group) -> None:
    group.add_command(calendars)
