"""The revision of the own namespace: the store lives in its own schema, with its own version table.
Revision ID: 0002_own_namespace
Revises: 0001_initial
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
