"""``alma-schedule migrate``: bring the SQL store to this version's schema (idempotent)."""

from __future__ import annotations

import click

from alma_schedule.cli.context import CliContext, emit_json, handle_errors, json_option


@click.command("migrate")
@click.option(
    "--database-url",
    "database_url",
    default=None,
    metavar="URL",
    help="Store to migrate (default: the global --database-url / ALMA_DATABASE_URL).",
)
@json_option
@click.pass_obj
@handle_errors
def migrate(obj: CliContext, database_url: str | None, as_json: bool) -> None:
    """Create or upgrade the tables of a PostgreSQL or SQLite store.

    Safe to run again (a store already up to date is left alone) and from several processes at
    once (PostgreSQL: an advisory lock; SQLite: one BEGIN IMMEDIATE transaction).

    \b
    Example:
      alma-schedule migrate --database-url postgresql+psycopg://alma@db/alma
    """
    from alma_schedule.stores.sql.errors import safe_url
    from alma_schedule.stores.sql.migrate import migrate_store

    url = database_url or obj.settings.database_url
    revision = migrate_store(url)
    if as_json:
        emit_json({"database_url": safe_url(url), "revision": revision})
    else:
        click.echo(f"{safe_url(url)} is at schema revision {revision}")


def register(group: click.Group) -> None:
    group.add_command(migrate)
