"""A database we share politely: the store's namespace (ALMA_DATABASE_SCHEMA), our own version
table, ONE head, a fleet's own tables untouched, two namespaces in one database, and the adoption
of a 0.1.0 store (refused without --adopt, every routine, cursor and run kept with it)."""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from alembic.script import ScriptDirectory
from click.testing import CliRunner

from alma_schedule.cli import cli
from alma_schedule.errors import AdoptionRequired, ConfigurationError, SchemaMismatch
from alma_schedule.settings import load_settings
from alma_schedule.stores import open_store
from alma_schedule.stores.sql import SqlStore, migrate_store
from alma_schedule.stores.sql.migrate import alembic_config, head_revision
from alma_schedule.stores.sql.namespace import SCHEMA_TOKEN
from alma_schedule.stores.sql.schema import HEAD_REVISION
from alma_schedule.testing.builders import SCOPE, T0, TIMERS, fire_due_long, register
from tests.stores.legacy_support import TABLES, build_0_1_0_store, snapshot_of
from tests.stores.sql_support import fast_dir, index_ddl, opened, pg_database, table_name


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def empty_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """A reachable database with no tables, on each backend."""
    if request.param == "sqlite":
        with fast_dir() as path:
            yield f"sqlite:///{path}/shared.sqlite3"
    else:
        with pg_database(migrated=False) as url:
            yield url


def _raw(url: str, *statements: str) -> None:
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            for sql in statements:
                conn.exec_driver_sql(sql)
    finally:
        engine.dispose()


def _rows(url: str, sql: str) -> list[tuple[Any, ...]]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return [tuple(r) for r in conn.exec_driver_sql(sql)]
    finally:
        engine.dispose()


# ------------------------------------------------------------------------------ the scripts


def test_the_migrations_have_one_head() -> None:
    script = ScriptDirectory.from_config(alembic_config())
    assert script.get_heads() == [HEAD_REVISION] == [head_revision()]
    chain = [rev.revision for rev in script.walk_revisions()]
    assert chain[-1] == "0001_initial" and chain[0] == HEAD_REVISION
    assert script.get_revision("0002_own_namespace").down_revision == "0001_initial"


def test_every_script_declares_its_objects_in_the_placeholder_schema() -> None:
    versions = Path(alembic_config().get_main_option("script_location") or "") / "versions"
    scripts = sorted(p.stem for p in versions.glob("0*.py"))
    assert scripts[:2] == ["0001_initial", "0002_own_namespace"]
    for name in scripts:
        module = importlib.import_module(f"alma_schedule.stores.sql.migrations.versions.{name}")
        assert module.SCHEMA == SCHEMA_TOKEN, name


# ------------------------------------------------------------------------------ a fleet's own tables

FLEET_DDL = (
    "CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL, "
    "CONSTRAINT alembic_version_pkc PRIMARY KEY (version_num))",
    "INSERT INTO alembic_version (version_num) VALUES ('f1ee7c0ffee1')",
    "CREATE TABLE routines (id INTEGER PRIMARY KEY, name VARCHAR(50) NOT NULL)",
    "CREATE TABLE runs (id INTEGER PRIMARY KEY, routine_id INTEGER NOT NULL, state VARCHAR(20))",
    # the same index name as one of ours (SQLite index names are global in a file)
    "CREATE INDEX ix_runs_poll ON runs (state)",
    "INSERT INTO routines (id, name) VALUES (1, 'nightly-report'), (2, 'hourly-sync')",
    "INSERT INTO runs (id, routine_id, state) VALUES (10, 1, 'done'), (11, 2, 'queued')",
)


def _fleet(url: str) -> tuple[Any, ...]:
    """The fleet's tables, rows and definitions, as the database reports them."""
    data = (
        _rows(url, "SELECT * FROM alembic_version ORDER BY 1"),
        _rows(url, "SELECT * FROM routines ORDER BY id"),
        _rows(url, "SELECT * FROM runs ORDER BY id"),
    )
    if url.startswith("postgresql"):
        ddl = _rows(
            url,
            "SELECT table_name, column_name, data_type, is_nullable, ordinal_position FROM information_schema.columns "
            "WHERE table_schema = 'public' ORDER BY table_name, ordinal_position",
        ) + _rows(url, "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public' ORDER BY 1")
    else:
        ddl = _rows(
            url, "SELECT type, name, tbl_name, sql FROM sqlite_master WHERE tbl_name NOT LIKE 'alma%' ORDER BY 2"
        )
    return data, tuple(ddl)


def test_migrate_beside_a_fleets_alembic_history_leaves_its_tables_untouched(empty_url: str) -> None:
    _raw(empty_url, *FLEET_DDL)
    before = _fleet(empty_url)
    assert before[0][0] == [("f1ee7c0ffee1",)] and len(before[0][1]) == 2
    assert migrate_store(empty_url) == HEAD_REVISION
    assert _fleet(empty_url) == before
    with opened(empty_url) as store:  # and our store works beside them
        register(store, "r1", next_due_at=T0)
        batch = store.claim_due(T0, 10, fire_due_long, TIMERS)
        assert [r.routine_id for r in batch.claimed] == ["r1"]
        assert [r.routine_id for r in store.list_routines(SCOPE)] == ["r1"]
    assert migrate_store(empty_url) == HEAD_REVISION
    assert _fleet(empty_url) == before
    assert _rows(empty_url, f"SELECT version_num FROM {table_name(empty_url, 'schedule_version')}") == [
        (HEAD_REVISION,)
    ]


def test_two_fleets_with_two_schemas_share_one_database(empty_url: str) -> None:
    assert migrate_store(empty_url, schema="fleet_a") == HEAD_REVISION
    assert migrate_store(empty_url, schema="fleet_b") == HEAD_REVISION
    with opened(empty_url, schema="fleet_a") as a, opened(empty_url, schema="fleet_b") as b:
        register(a, "only-in-a", next_due_at=T0)
        register(b, "only-in-b", next_due_at=T0)
        assert [r.routine_id for r in a.list_routines(SCOPE)] == ["only-in-a"]
        assert [r.routine_id for r in b.list_routines(SCOPE)] == ["only-in-b"]
        assert [r.routine_id for r in a.claim_due(T0, 10, fire_due_long, TIMERS).claimed] == ["only-in-a"]
        assert b.list_runs(SCOPE) == []
        assert [r.routine_id for r in b.claim_due(T0, 10, fire_due_long, TIMERS).claimed] == ["only-in-b"]
        assert [r.routine_id for r in a.list_runs(SCOPE)] == ["only-in-a"]
    with opened(empty_url) as default:  # the default namespace was never migrated
        with pytest.raises(SchemaMismatch, match="not migrated"):
            default.list_routines(SCOPE)


# ------------------------------------------------------------------------------ the setting


def test_the_schema_setting_is_validated_in_one_line_naming_it() -> None:
    assert load_settings(environ={}).database_schema == "alma"
    assert load_settings(environ={"ALMA_DATABASE_SCHEMA": "fleet_2"}).database_schema == "fleet_2"
    for bad in ("Fleet", "fleet-2", "2fleet", "", "a" * 64, "pg_alma", 'x"; drop'):
        with pytest.raises(ConfigurationError, match=r"^ALMA_DATABASE_SCHEMA: ") as info:
            load_settings(environ={"ALMA_DATABASE_SCHEMA": bad})
        assert "\n" not in str(info.value)
    with fast_dir() as path, pytest.raises(ConfigurationError, match="ALMA_DATABASE_SCHEMA"):
        SqlStore(f"sqlite:///{path}/s.sqlite3", schema="Bad Name")
    with pytest.raises(ConfigurationError, match="ALMA_DATABASE_SCHEMA"):
        migrate_store("sqlite:///unused.sqlite3", schema="bad-name")


def test_open_store_keeps_its_url_form_and_takes_the_schema() -> None:
    with fast_dir() as path:
        url = f"sqlite:///{path}/s.sqlite3"
        migrate_store(url, schema="other")
        default, other = open_store(url), open_store(url, schema="other")
        try:
            assert isinstance(default, SqlStore) and default.schema == "alma"
            assert isinstance(other, SqlStore) and other.schema == "other"
            register(other, "r1")
            assert [r.routine_id for r in other.list_routines(SCOPE)] == ["r1"]
            with pytest.raises(SchemaMismatch):
                default.list_routines(SCOPE)
        finally:
            default.close()
            other.close()
        assert open_store("memory://", schema="ignored").list_routines(SCOPE) == []


def test_a_version_this_code_does_not_know_is_one_error(empty_url: str) -> None:
    migrate_store(empty_url)
    _raw(empty_url, f"UPDATE {table_name(empty_url, 'schedule_version')} SET version_num = '0099_future'")
    with pytest.raises(SchemaMismatch, match=r"0099_future.*newer alma-schedule") as info:
        migrate_store(empty_url)
    assert "\n" not in str(info.value)


# ------------------------------------------------------------------------------ a 0.1.0 store


def _default_tables(url: str) -> set[str]:
    if url.startswith("postgresql"):
        return {r[0] for r in _rows(url, "SELECT tablename FROM pg_tables WHERE schemaname = 'public'")}
    return {r[0] for r in _rows(url, "SELECT name FROM sqlite_master WHERE type = 'table'")} & {
        *TABLES,
        "alembic_version",
    }


def test_a_0_1_0_store_is_refused_naming_its_tables_and_nothing_is_written(empty_url: str) -> None:
    build_0_1_0_store(empty_url)
    before = _default_tables(empty_url)
    assert before == {*TABLES, "alembic_version"}
    with pytest.raises(AdoptionRequired, match="migrate --adopt") as info:
        migrate_store(empty_url)
    message = str(info.value)
    assert "\n" not in message and "0001_initial" in message
    assert all(t in message for t in TABLES)
    assert _default_tables(empty_url) == before
    assert _rows(empty_url, "SELECT version_num FROM alembic_version") == [("0001_initial",)]
    if empty_url.startswith("postgresql"):  # the schema migrate created went with the rollback
        assert _rows(empty_url, "SELECT to_regnamespace('alma')") == [(None,)]
    else:
        assert _rows(empty_url, "SELECT name FROM sqlite_master WHERE name LIKE 'alma%'") == []


def test_adopt_moves_a_0_1_0_store_and_keeps_every_routine_cursor_and_run(empty_url: str) -> None:
    snapshot = build_0_1_0_store(empty_url)
    (routines, runs), _tick, _spend = snapshot
    assert len(routines) == 6 and sum(len(r) for r in runs) == 5
    assert any(r.next_due_at is not None and r.last_fire is not None for r in routines)  # cursors moved
    assert migrate_store(empty_url, adopt=True) == HEAD_REVISION
    assert _default_tables(empty_url) == set()  # moved, and 0.1.0's alembic_version dropped
    with opened(empty_url) as store:
        assert snapshot_of(store) == snapshot
        assert store.routine_versions(SCOPE, "idle") and len(store.routine_versions(SCOPE, "idle")) == 2
    # The adopted store has the very indexes of a new one (names included: SQLite's are prefixed).
    with fast_dir() as path:
        if empty_url.startswith("postgresql"):
            with pg_database() as fresh:
                assert index_ddl(empty_url) == index_ddl(fresh)
        else:
            fresh = f"sqlite:///{path}/fresh.sqlite3"
            migrate_store(fresh)
            assert index_ddl(empty_url) == index_ddl(fresh)
    assert migrate_store(empty_url, adopt=True) == HEAD_REVISION  # again: nothing to adopt


def test_a_fleets_own_0001_initial_without_our_tables_is_not_adopted(empty_url: str) -> None:
    """Only OUR five tables beside 0001_initial are a 0.1.0 store: a fleet revision of that name is not."""
    _raw(
        empty_url,
        *FLEET_DDL[:1],
        "INSERT INTO alembic_version (version_num) VALUES ('0001_initial')",
        *FLEET_DDL[2:4],
    )
    assert migrate_store(empty_url, adopt=True) == HEAD_REVISION
    assert _rows(empty_url, "SELECT version_num FROM alembic_version") == [("0001_initial",)]
    assert _default_tables(empty_url) >= {"routines", "runs", "alembic_version"}


def test_cli_migrate_refuses_a_0_1_0_store_in_one_line_and_adopts_with_the_flag(empty_url: str) -> None:
    build_0_1_0_store(empty_url)
    runner = CliRunner()
    refused = runner.invoke(cli, ["migrate", "--database-url", empty_url])
    assert refused.exit_code == 1
    lines = [line for line in refused.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), refused.output
    assert "--adopt" in lines[0] and "routine_versions" in lines[0]
    adopted = runner.invoke(cli, ["migrate", "--database-url", empty_url, "--adopt", "--json"])
    assert adopted.exit_code == 0, adopted.output
    assert '"adopted": [' in adopted.output and '"schema": "alma"' in adopted.output
    again = runner.invoke(cli, ["migrate", "--database-url", empty_url, "--adopt"])
    assert again.exit_code == 0 and "adopted" not in again.output and HEAD_REVISION in again.output


@pytest.mark.postgres
def test_adopting_into_the_default_schema_itself_moves_nothing_and_keeps_everything() -> None:
    with pg_database(migrated=False) as url:
        snapshot = build_0_1_0_store(url)
        assert migrate_store(url, adopt=True, schema="public") == HEAD_REVISION
        assert _default_tables(url) == {*TABLES, "schedule_version", "zone_state", "tick_log"}  # in place
        with opened(url, schema="public") as store:
            assert snapshot_of(store) == snapshot


@pytest.mark.postgres
def test_postgres_names_the_schema_in_every_statement_not_through_search_path() -> None:
    """PgBouncer (transaction mode) rejects a search_path startup option: the store never sets one."""
    with pg_database(migrated=False) as url:
        migrate_store(url, schema="fleet_x")
        with opened(url, schema="fleet_x") as store:
            seen: list[str] = []
            sa.event.listen(store.engine, "before_cursor_execute", lambda *a: seen.append(a[2]))
            register(store, "r1", next_due_at=T0)
            store.claim_due(T0, 10, fire_due_long, TIMERS)
            with store.engine.connect() as conn:
                assert conn.exec_driver_sql("SHOW search_path").scalar() == '"$user", public'
        touching = [s for s in seen if "routines" in s or "runs" in s]
        assert touching and all("fleet_x." in s for s in touching), touching
        assert not any(SCHEMA_TOKEN in s for s in seen)
