"""The claim's INSERT built ahead (``store_tick``: while the server runs the supersede): its column
arrays transposed and rendered as array literals before the blocked fires are known, then patched.
Whatever was built ahead, the statement and the values sent are the ones built from the final
records (``hot.Rendered.args``), and a column a patch changed is never sent as rendered before it."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from psycopg.types.json import Jsonb

from alma_schedule.model import RunRecord, RunState
from alma_schedule.stores.postgres import hot
from alma_schedule.stores.sql import queries as q
from alma_schedule.stores.sql.rows import new_record, record_with
from alma_schedule.testing.builders import T0

NOW = T0 + timedelta(minutes=5)


def _records(n: int) -> list[RunRecord]:
    return [
        new_record(
            (f"org{i % 3}", f"u{i % 7}", f"r{i:04d}"),
            "2026-01-01T00:05:00Z",
            state=RunState.CLAIMED if i % 5 else "skipped",
            reason=None if i % 5 else "missed",
            origin="schedule",
            config_revision=f"rev{i % 2}",
            fire_at=NOW,
            now=NOW,
            expires_at=NOW + timedelta(minutes=i % 4 + 1),
            resend_at=NOW + timedelta(seconds=30) if i % 5 else None,
        )
        for i in range(n)
    ]


def _sent(recs: list[RunRecord], **ahead: Any) -> tuple[str, list[Any]]:
    stmt, params = q.insert_records("postgresql", recs, **ahead)
    assert isinstance(params, dict)
    built = hot.rendered(stmt, "alma")
    args = [("json", a.obj) if isinstance(a, Jsonb) else a for a in built.args(params)]  # Jsonb: no __eq__
    return built.sql, args


def test_arrays_rendered_ahead_send_what_the_records_would() -> None:
    recs = _records(40)
    columns = q.record_columns(recs)
    rendered = {name: hot.array_literal(values) for name, values in columns.items()}
    assert any(type(v) is hot.ArrayLiteral for v in rendered.values())
    assert _sent(recs, columns=columns, rendered=rendered) == _sent(recs)


def test_a_patched_row_drops_the_arrays_it_changed_and_the_insert_sends_the_patched_records() -> None:
    recs = _records(40)
    columns = q.record_columns(recs)
    rendered = {name: hot.array_literal(values) for name, values in columns.items()}
    before = dict(rendered)
    blocked = record_with(recs[3], state="skipped", reason="overlap", resend_at=None, finished_at=NOW)
    recs[3] = blocked
    q.patch_columns(columns, 3, blocked, rendered)
    assert set(before) - set(rendered) == {"state", "reason", "resend_at", "finished_at"}  # the others stay
    assert _sent(recs, columns=columns, rendered=rendered) == _sent(recs)
    assert columns == q.record_columns(recs)


def test_a_list_that_cannot_be_a_literal_stays_a_list() -> None:
    assert hot.array_literal(['a "quoted" name', "b"]) == ['a "quoted" name', "b"]
    assert type(hot.array_literal(["a", None])) is hot.ArrayLiteral
    assert hot.array_literal([]) == []
