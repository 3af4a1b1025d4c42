"""Issue 13's revision: the store lives in its own namespace, with its own version table.

Revision ID: 0002_own_namespace
Revises: 0001_initial
Create Date: 2026-04-01

From this revision on, every table is in the store's namespace (``ALMA_DATABASE_SCHEMA``: a
PostgreSQL schema, an SQLite table prefix) and the revision is kept in our own version table
(``schedule_version`` there), never in a fleet's ``alembic_version``. The layout itself comes with
the environment (``env.py``): a new store gets it from ``0001_initial``; a 0.1.0 store is moved there
by ``alma-schedule migrate --adopt`` (offline: the one exception to the rules below), which stamps
``0001_initial`` and then runs this revision. This revision's own changes are expand-only.

The project's rules for a revision: ONE revision per issue (later changes of issue 13 go here);
expand-only and safe while old workers run (new columns nullable or with a constant default, new
indexes, no rename or drop); state lists as literals, never imported from the model; every table
and index in the placeholder schema ``SCHEMA``.
"""

from __future__ import annotations

revision = "0002_own_namespace"
down_revision = "0001_initial"
branch_labels = None
depends_on = None

#: The placeholder schema (a literal: a script never imports the code it migrates).
SCHEMA = "alma_schedule_schema"


def upgrade() -> None:
    """No table changes yet: the revision marks the namespaced layout (see the module docstring)."""


def downgrade() -> None:
    """Nothing to undo."""
