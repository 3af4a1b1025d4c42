"""``alma-schedule hash-password``: the value of ALMA_DASHBOARD_PASSWORD_HASH."""

from __future__ import annotations

import click

from alma_schedule.cli.context import handle_errors


@click.command("hash-password")
@click.option("--password", default=None, help="The password (default: asked twice, not echoed).")
@handle_errors
def hash_password_cmd(password: str | None) -> None:
    """Print the scrypt hash of a dashboard password (for ALMA_DASHBOARD_PASSWORD_HASH).

    \b
    Example:
      export ALMA_DASHBOARD_PASSWORD_HASH="$(alma-schedule hash-password)"
    """
    from alma_schedule.dashboard.auth import hash_password

    if password is None:
        password = click.prompt("password", hide_input=True, confirmation_prompt=True, err=True)
    if not password:
        raise click.UsageError("the password must not be empty")
    click.echo(hash_password(password))


def register(group: click.Group) -> None:
    group.add_command(hash_password_cmd)
