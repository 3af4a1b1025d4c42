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
@click.option(
    "--adopt",
    is_flag=True,
    help="Move a 0.1.0 store's tables (default schema) into ALMA_DATABASE_SCHEMA first. Offline: "
    "stop workers and clocks before, start the new version after.",
)
@json_option
@click.pass_obj
@handle_errors
def migrate(obj: CliContext, database_url: str | None, adopt: bool, as_json: bool) -> None:
    """Create or upgrade the tables of a PostgreSQL or SQLite store, in its own schema.

    The tables live in ALMA_DATABASE_SCHEMA (default alma; on SQLite a table prefix) with their own
    version table, so a database that already holds a fleet's alembic_version, routines or runs is
    shared without touching them. Safe to run again (a store already up to date is left alone) and
    from several processes at once (PostgreSQL: an advisory lock; SQLite: one BEGIN IMMEDIATE
    transaction). A 0.1.0 store is refused until --adopt. With no store configured it refuses
    (it would create a file): give -A, ALMA_DATABASE_URL, --database-url or [tool.alma-schedule].

    \b
    Example:
      alma-schedule -A proj migrate      # the store of proj's alma_database_url
      alma-schedule migrate --database-url postgresql+psycopg://alma@db/alma
      alma-schedule -A proj migrate --adopt        # once, upgrading a 0.1.0 store
    """
    url = database_url or obj.store_url()  # never the embedded default: it would create ./alma-schedule.sqlite3
    from alma_schedule.stores.sql.errors import safe_url
    from alma_schedule.stores.sql.migrate import migrate as run_migration

    done = run_migration(url, adopt=adopt, schema=obj.settings.database_schema)
    if as_json:
        emit_json(
            {
                "database_url": safe_url(url),
                "schema": done.namespace,
                "revision": done.revision,
                "adopted": list(done.adopted),
            }
        )
        return
    if done.adopted:
        click.echo(f"adopted the 0.1.0 tables {', '.join(done.adopted)} into {done.namespace!r}")
    click.echo(f"{safe_url(url)} is at schema revision {done.revision} (schema {done.namespace!r})")


def register(group: click.Group) -> None:
    group.add_command(migrate)
