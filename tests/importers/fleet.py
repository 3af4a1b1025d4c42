"""``-A tests.importers.fleet:app``: the importer tests' fleet app, importable by the CLI."""

from __future__ import annotations

from tests.importers.support import fleet_app

app = fleet_app()
