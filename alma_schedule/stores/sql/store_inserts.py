"""The run rows of a claim, inserted (:class:`InsertsMixin`, under :mod:`.store_tick`): the INSERT
with its fallbacks' checks, SQLite's chunking under its bind limit, the driver's plain rows.

``HeldCheck``: a short batch's check for due rows other transactions held (PostgreSQL), carried by
its first INSERT's ``RETURNING`` when that INSERT returns a row (:func:`.queries.inserts.insert_records`),
else asked with its own statement by ``claim_due``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from alma_schedule.errors import StoreConflict
from alma_schedule.model import RunRecord
from alma_schedule.stores.sql import queries as q
from alma_schedule.stores.sql.store_base import RKey
from alma_schedule.stores.sql.store_buffered import BufferedMixin

SQLITE_CHUNK = 2000


@dataclass
class HeldCheck:
    """Whether a routine other than ``besides`` is due at ``now`` (:func:`.queries.claim.due_exists`):
    ``found`` stays None until a statement answered."""

    now: datetime
    besides: list[RKey]
    found: bool | None = None


class InsertsMixin(BufferedMixin):
    def _insert(
        self, conn: Any, records: list[RunRecord], by_key: dict[Any, RunRecord], held: HeldCheck | None = None
    ) -> dict[Any, RunRecord]:
        """Insert these records (``ON CONFLICT DO NOTHING``): the ones inserted, by run key; with
        ``held`` (PostgreSQL) its check rides in the INSERT, answered when a row came back."""
        done: dict[Any, RunRecord] = {}
        check = (held.now, held.besides) if held is not None else None
        for chunk in self._chunks(records):
            rows = self._rows(conn, *q.insert_records(self.dialect, chunk, check))
            if held is not None:
                if rows:
                    held.found = bool(rows[0][4])
                rows = [row[:4] for row in rows]
            done.update((tuple(key), by_key[tuple(key)]) for key in rows)
        return done

    def _check_duplicates(self, conn: Any, keys: list[tuple[str, str, str, str]]) -> None:
        """Fires that got no row must be duplicates (their run key exists): anything else cannot
        happen while every insert of a run locks its routine first; if it did, roll back, loudly.
        A statement only when some fire got no row."""
        existing: set[tuple[Any, ...]] = set()
        for chunk in self._chunks(keys):
            stmt, params = q.existing_runs(self.dialect, chunk)
            existing.update(tuple(row) for row in conn.execute(stmt, params).all())
        for key in keys:
            if key not in existing:
                raise StoreConflict(f"fire {'/'.join(key)} could not be recorded; nothing was claimed")

    def _chunks(self, items: list[Any]) -> list[list[Any]]:
        """PostgreSQL binds arrays (one statement whatever the size); SQLite binds each value, under
        its 32,766-variable limit: row-value lists go in chunks of 2,000 rows."""
        if self.dialect == "postgresql" or len(items) <= SQLITE_CHUNK:
            return [items] if items else []
        return [items[i : i + SQLITE_CHUNK] for i in range(0, len(items), SQLITE_CHUNK)]
